"""An engine that runs its backend in the calling process: the seam unit tests use to drive the runtime with
the deterministic fake backend, at full speed and with its knobs in reach. Hearth itself always uses
``client.EngineProcess``; a crash here would take the caller down with it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from backends.base import Backend, CancelToken, ChatEvent, ChatMessage, GenerationParams, LoadOptions, LoadProgress
from models.gguf import ModelInfo


class LocalEngine:
    def __init__(self, backend: Backend, model: ModelInfo, options: LoadOptions) -> None:
        self.backend = backend
        self.model = model
        self.options = options
        self._loaded = False

    @property
    def pid(self) -> int | None:
        return None

    @property
    def alive(self) -> bool:
        return self._loaded

    @property
    def context_length(self) -> int:
        return self.backend.context_length

    @property
    def slots(self) -> int:
        return self.backend.slots

    @property
    def notes(self) -> tuple[str, ...]:
        return self.backend.notes

    def start(self) -> Iterator[LoadProgress]:
        yield from self.backend.load(self.model, self.options)
        self._loaded = True

    def close(self) -> None:
        self._loaded = False
        self.backend.close()

    def abort(self) -> None:
        self.close()

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        return self.backend.stream_chat(messages, params, cancel)

    def stream_completion(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]:
        return self.backend.stream_completion(prompt, params, cancel)

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    def set_threads(self, threads: int | None) -> None:
        self.backend.set_threads(threads)

    def forget_owner(self, owner: str) -> None:
        self.backend.forget_owner(owner)

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.backend.count_chat_tokens(messages)
