"""Errors a user can act on.

Every error here carries a ``remedy``: one sentence that tells the person what to do next. They are raised
anywhere below the boundary and turned into a ``gr.Error``, an HTTP error or a CLI message only at the
boundary (``app/ui``, ``app/api``, ``app/cli``). This module imports nothing from the project, so every layer
may use it.
"""

from __future__ import annotations

# Past this many characters, a value the user sent is shown shortened in a message (an id of megabytes is not
# worth echoing back).
SHOWN_CHARS = 80


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """``value`` quoted for a message, shortened to its start and its length when it is long."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[: limit - 20]!r}… ({len(value):,} characters)"


class HearthError(Exception):
    """Base class: a message saying what happened and a remedy saying what to do. Where the remedy speaks of the
    command line (`hearth models default ID`), ``page_remedy`` says the same in the web page's terms (which tab,
    which button); the page shows it instead."""

    page_remedy: str | None = None

    def __init__(self, message: str, remedy: str, page_remedy: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.remedy = remedy
        if page_remedy is not None:
            self.page_remedy = page_remedy

    @property
    def for_page(self) -> str:
        """What the web page says: the message and the remedy in the page's terms."""
        return f"{self.message} {self.page_remedy or self.remedy}"

    def __str__(self) -> str:
        return f"{self.message} {self.remedy}"


def error_class(name: str) -> type[HearthError] | None:
    """The loaded :class:`HearthError` subclass called ``name`` (any layer's, not only this module's), for an error
    that crossed a process boundary by name. A class whose constructor needs more than a message and a remedy
    (``WorkersStopped``'s workers) gives its nearest ancestor that does not, so it can be built again; None for a
    name no loaded class has."""
    pending: list[type[HearthError]] = [HearthError]
    while pending:
        current = pending.pop()
        if current.__name__ == name:
            while current.__init__ is not HearthError.__init__ and current is not HearthError:
                current = next(base for base in current.__mro__[1:] if issubclass(base, HearthError))
            return current
        pending.extend(current.__subclasses__())
    return None


class ModelFileError(HearthError):
    """The model file is missing, unreadable, truncated or not a GGUF file."""


class ModelLoadError(HearthError):
    """The inference engine refused a model file that passed validation."""


class DoesNotFit(HearthError):
    """The model and its KV cache need more memory than the machine has available. What would fit, when known, is
    data as well as words: ``context_that_fits`` (tokens, on the CPU) and ``gpu_layers_that_fit``."""

    context_that_fits: int | None = None
    gpu_layers_that_fit: int | None = None


class ContextTooLong(HearthError):
    """The prompt cannot fit in the model's context window, even after trimming history."""


class EmptyMessage(HearthError):
    """The user sent nothing to answer."""


class LoadCancelled(HearthError):
    """The person cancelled a model load (one stuck loading, or slow to answer its first question)."""


class ModelNotReady(HearthError):
    """A chat was attempted while no model is loaded."""


class BackendUnavailable(HearthError):
    """No backend can run the model here, or a requested one is missing."""


class ConversationNotFound(HearthError):
    """A conversation id that is not in the store."""


class StorageError(HearthError):
    """The conversation database cannot be opened or written."""


class InvalidChoice(HearthError):
    """A setting asked for (a backend, a device, a context length) that can never be valid."""


class NotAnUpload(HearthError):
    """A page handler was handed a file path that the page's upload route did not store in this run."""


class DiskFull(StorageError):
    """The disk that holds Hearth's data is full: nothing is damaged, and nothing stored was lost."""


class GenerationError(HearthError):
    """The engine failed in the middle of an answer."""


class EngineStopped(HearthError):
    """The engine process ended in the middle of an answer (killed, crashed, out of memory); it is restarting."""


class WorkersStopped(EngineStopped):
    """The engine ended because workers holding a model's layers stopped answering (llama.cpp aborts then);
    ``workers`` names them (their control addresses), so the model can be planned again without them. ``held_up``:
    they answered pings but not llama.cpp (their server was held by another connection)."""

    def __init__(
        self,
        message: str,
        remedy: str,
        workers: tuple[str, ...],
        held_up: bool = False,
        page_remedy: str | None = None,
    ) -> None:
        super().__init__(message, remedy, page_remedy)
        self.workers = workers
        self.held_up = held_up


class Busy(HearthError):
    """Every answer slot is taken and the waiting line is full; try again after ``retry_after_s``."""

    def __init__(self, message: str, remedy: str, retry_after_s: int = 2) -> None:
        super().__init__(message, remedy)
        self.retry_after_s = retry_after_s


class TrainingDataError(HearthError):
    """Training data that cannot be used as it is: empty, not JSON Lines, wrong keys, too large."""


class TuningError(HearthError):
    """A tuning run that cannot start or cannot go on (settings out of range, a model the trainer cannot load,
    a disk that filled up)."""


class AdapterError(HearthError):
    """A LoRA adapter that is missing, damaged, or made for another base model."""
