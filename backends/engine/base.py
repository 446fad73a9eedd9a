"""What the runtime needs of an engine, wherever the model runs (``client.EngineProcess`` in a child process,
``local.LocalEngine`` in this one)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from backends.base import CancelToken, ChatEvent, ChatMessage, GenerationParams, LoadProgress
from models.gguf import ModelInfo


class Engine(Protocol):
    @property
    def model(self) -> ModelInfo: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def alive(self) -> bool: ...

    @property
    def context_length(self) -> int: ...

    @property
    def slots(self) -> int: ...

    @property
    def notes(self) -> tuple[str, ...]: ...

    def start(self) -> Iterator[LoadProgress]: ...

    def close(self) -> None: ...

    def abort(self) -> None:
        """Stop at once, for an engine that may be stuck (``close`` asks first and waits)."""
        ...

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]: ...

    def stream_completion(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]: ...

    def count_tokens(self, text: str) -> int: ...

    def set_threads(self, threads: int | None) -> None:
        """Compute with ``threads`` CPU threads from the next step on (None: as loaded), where the backend can."""
        ...

    def forget_owner(self, owner: str) -> None:
        """Keep nothing more of the deleted conversation ``owner``'s caches (``GenerationParams.cache_owner``)."""
        ...

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int: ...
