"""Messages between :mod:`rag.reading.reader` and its child process :mod:`rag.reading.reader_worker` (pickled over a
socket; a module of their own so that both sides name the same classes, the child running as ``__main__``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rag.reading.limits import ReadLimits
from rag.reading.sections import Section


@dataclass(frozen=True)
class Start:
    memory_bytes: int
    log_level: int
    quiet_loggers: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReadRequest:
    path: str
    limits: ReadLimits


@dataclass(frozen=True)
class ReadProgress:
    """Sent while a file is read, as often as its loader reports (pages of a PDF), at most every few tenths of a
    second; ``pages_total`` is ``None`` until the loader knows it."""

    pages_done: int = 0
    pages_total: int | None = None


@dataclass(frozen=True)
class ReadReply:
    sections: list[Section] = field(default_factory=list)
    reason: str | None = None  # set when the file was refused
    restart: bool = False  # this process is done (after running out of memory); start a fresh one
