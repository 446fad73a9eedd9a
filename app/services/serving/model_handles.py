"""What the runtime takes and hands out: the model to load and how (:class:`ModelChoice`), the model held for one
answer (:class:`Lease`), and the runtime's state as the page and the API show it (:class:`RuntimeStatus`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from backends.base import CancelToken, ChatEvent, ChatMessage, GenerationParams, SavedCaches, WorkerLink
from backends.engine.base import Engine
from backends.plan import BackendPlan, Preferences
from models.gguf import ModelInfo

State = Literal["idle", "loading", "ready", "restarting", "error"]


@dataclass(frozen=True)
class RuntimeStatus:
    state: State
    model_name: str = ""
    message: str = ""
    plan: BackendPlan | None = None
    notes: tuple[str, ...] = field(default=())
    engine_pid: int | None = None
    answers: int = 0  # answers being written or waiting for a slot
    slots: int = 0
    pending: str = ""  # a model loading beside the serving one, which keeps answering


@dataclass(frozen=True)
class ModelChoice:
    """What to load: a GGUF file and the user's preferences for running it."""

    path: Path
    prefs: Preferences
    seed: int = 0
    cache_dir: str | None = None
    worker_links: tuple[WorkerLink, ...] = ()  # how to reach the paired workers among ``prefs.workers``
    saved_caches: SavedCaches | None = None  # where llama.cpp keeps conversations' caches (None: in memory only)


class Lease:
    """The model, held for one answer. Streams started through it can be cancelled by a switch."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._cancels: list[CancelToken] = []

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def model(self) -> ModelInfo:
        return self._engine.model

    @property
    def context_length(self) -> int:
        return self._engine.context_length

    @property
    def slots(self) -> int:
        return self._engine.slots

    @property
    def notes(self) -> tuple[str, ...]:
        return self._engine.notes

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        self._cancels.append(cancel)
        return self._engine.stream_chat(messages, params, cancel)

    def stream_completion(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]:
        self._cancels.append(cancel)
        return self._engine.stream_completion(prompt, params, cancel)

    def count_tokens(self, text: str) -> int:
        return self._engine.count_tokens(text)

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self._engine.count_chat_tokens(messages)

    def cancel(self) -> None:
        for token in self._cancels:
            token.cancel()
