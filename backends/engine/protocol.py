"""Typed messages between the web process and an engine process. They travel pickled over a private socket
pair between two processes of the same installation, never over a network."""

from __future__ import annotations

from dataclasses import dataclass

import models.shared.errors
from backends.base import ChatEvent, ChatMessage, GenerationParams, LoadOptions, LoadProgress
from models.gguf import ModelInfo
from models.shared.errors import GenerationError, HearthError

# --- from the web process -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """The first message: what to load, and the lowest log level the web process wants to see."""

    backend: str
    model: ModelInfo
    options: LoadOptions
    log_level: int


@dataclass(frozen=True)
class ChatRequest:
    id: int
    messages: tuple[ChatMessage, ...]
    params: GenerationParams


@dataclass(frozen=True)
class CompletionRequest:
    id: int
    prompt: str
    params: GenerationParams


@dataclass(frozen=True)
class CountRequest:
    """Tokens of ``text`` (plain) or of ``messages`` rendered as a chat prompt."""

    id: int
    text: str | None = None
    messages: tuple[ChatMessage, ...] | None = None


@dataclass(frozen=True)
class CancelRequest:
    id: int


@dataclass(frozen=True)
class ForgetRequest:
    """A conversation was deleted: keep nothing more of ``owner``'s (``GenerationParams.cache_owner``)."""

    owner: str


@dataclass(frozen=True)
class ThreadsRequest:
    """Compute with ``threads`` CPU threads from now on (None: as loaded); nothing is answered."""

    threads: int | None


@dataclass(frozen=True)
class Shutdown:
    pass


Request = ChatRequest | CompletionRequest | CountRequest | CancelRequest | ThreadsRequest | ForgetRequest | Shutdown

# --- from the engine ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorInfo:
    """A typed error, by the name of its class (any loaded :class:`HearthError` subclass, from any layer):
    exceptions themselves do not pickle well."""

    kind: str
    message: str
    remedy: str
    page_remedy: str | None = None  # the remedy in the page's terms, when it has its own

    @classmethod
    def of(cls, exc: HearthError) -> ErrorInfo:
        return cls(type(exc).__name__, exc.message, exc.remedy, exc.page_remedy)

    def to_exception(self) -> HearthError:
        found = models.shared.errors.error_class(self.kind) or GenerationError
        error = found(self.message, self.remedy)
        if self.page_remedy is not None:
            error.page_remedy = self.page_remedy
        return error


@dataclass(frozen=True)
class Ready:
    context_length: int
    slots: int
    notes: tuple[str, ...]


@dataclass(frozen=True)
class NotesChanged:
    """The loaded model's notes after a change while it serves (its chat template refused at a later turn)."""

    notes: tuple[str, ...]


@dataclass(frozen=True)
class LoadFailed:
    error: ErrorInfo


@dataclass(frozen=True)
class Reply:
    """One event of a streamed answer, or the result of a count."""

    id: int
    event: ChatEvent | int


@dataclass(frozen=True)
class Failed:
    id: int
    error: ErrorInfo


@dataclass(frozen=True)
class LogLine:
    """A log record of the engine's, re-emitted in the web process under the same logger name."""

    name: str
    level: int
    message: str


Response = LoadProgress | Ready | LoadFailed | NotesChanged | Reply | Failed | LogLine
