"""How far the reading of one file has got, reported from inside a loader (a PDF, page by page) to whoever reads it.

A loader calls :func:`report_pages` as it goes; the reader process (:mod:`rag.reading.reader_worker`) installs a sink
with :func:`pages_reported_to` that sends the counts to the process indexing the file, which shows them. Read anywhere
else (a test, a script), nobody listens and the call costs nothing. A context variable rather than a parameter, so that
no loader's signature has to carry it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

PagesSink = Callable[[int, int], None]

_sink: ContextVar[PagesSink | None] = ContextVar("hearth_read_progress_sink", default=None)


def report_pages(done: int, total: int) -> None:
    """``done`` of the file's ``total`` pages have been read."""
    sink = _sink.get()
    if sink is not None:
        sink(done, total)


@contextmanager
def pages_reported_to(sink: PagesSink) -> Iterator[None]:
    """Send the :func:`report_pages` calls made inside the block to ``sink``."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)
