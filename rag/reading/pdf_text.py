"""The text of a PDF, one section per page, with the number of pages and the text bounded.

pypdf directly rather than LangChain's PyPDFLoader: the loader asks pypdf for the labels of *all* pages once per
page (quadratic: a 100,000-page PDF was still being read after 5 minutes) and cannot stop part-way. Here the page
count is checked before any page is read (the declared count first, then the real one, with pypdf's own page-tree
walk capped just above the limit so that a false count cannot make it walk 100,000 pages), and each page's text is
counted against the limit as it is extracted. pypdf bounds some of the work inside a page itself (decompressed
stream sizes, operators per content stream), but its text extraction slows with the square of a page's text, so
each page also gets a time limit; the reader process bounds time and memory around all of it.

A page is one section or, where the PDF has bookmarks (an outline), one per heading that starts on it, named by
the bookmark path ("Basic Shell Features › Shell Commands › Compound Commands"): a passage never spans two pages.
Running headers and footers ("Chapter 3: Basic Shell Features 14") are left out, and words the typesetting broke
at a line end ("Environ-\nment") are joined again (``rag.reading.pdf_words``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from rag.reading.limits import ReadLimits, too_many_pages
from rag.reading.pdf_outline import Outline, read_outline, without_running_lines
from rag.reading.pdf_words import join_broken_words_in
from rag.reading.sections import Section, Skipped, TextBudget

# Room in pypdf's page-tree walk for the intermediate nodes of a tree that holds the largest allowed page count.
_TREE_NODES_PER_PAGE = 2
_TREE_NODES_SPARE = 1_000
# Bookmarks read per page of the limit (a manual has a few per page at most).
OUTLINE_ENTRIES_PER_PAGE = 10


def pdf_sections(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from pypdf import PdfReader, apply_configuration
    from pypdf.errors import LimitReachedError, PyPdfError

    from rag.reading.read_progress import report_pages

    tree_entries = limits.max_pdf_pages * _TREE_NODES_PER_PAGE + _TREE_NODES_SPARE
    page_number = 0
    try:
        with apply_configuration(page_tree_maximum_entries=tree_entries):
            reader = PdfReader(str(path))
            if reader.is_encrypted:
                raise Skipped("the PDF is encrypted; save an unlocked copy and add that")
            declared = _declared_pages(reader)
            if declared is not None and declared > limits.max_pdf_pages:
                raise Skipped(too_many_pages(limits, declared))
            try:
                pages = reader.pages
                count = len(pages)
            except LimitReachedError as exc:
                raise Skipped(too_many_pages(limits)) from exc
            if count > limits.max_pdf_pages:
                raise Skipped(too_many_pages(limits, count))
            headings = _outline(reader, limits)
            texts = []
            for page_number, page in enumerate(pages, start=1):
                with _time_limit(limits.max_page_s):
                    texts.append(budget.take(page.extract_text()))
                report_pages(page_number, count)
            texts = join_broken_words_in(without_running_lines(texts))
            return [part for number, text in enumerate(texts, start=1) for part in headings.split_page(text, number)]
    except _PageTooSlow:
        raise Skipped(
            f"page {page_number} takes longer than {limits.max_page_s:g} s to read (it draws an enormous amount of "
            "text); the PDF was not indexed. It may be damaged or built to exhaust readers"
        ) from None
    except LimitReachedError as exc:
        raise Skipped(
            f"page {page_number} is too complex to read ({exc}); the PDF was not indexed. It may be damaged or "
            "built to exhaust readers"
        ) from exc
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise Skipped(f"the PDF cannot be read ({type(exc).__name__}: {exc}); it may be damaged") from exc


def _outline(reader: Any, limits: ReadLimits) -> Outline:
    """The document's bookmarks, within the time limit of a page; none if they cannot be read (a PDF with broken
    bookmarks is still read, without section names)."""
    try:
        with _time_limit(limits.max_page_s):
            return read_outline(reader, max_entries=limits.max_pdf_pages * OUTLINE_ENTRIES_PER_PAGE)
    except _PageTooSlow:
        return Outline([])


class _PageTooSlow(BaseException):
    """Raised by the page's alarm; a BaseException, so that pypdf's own ``except Exception`` blocks let it pass."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` with :class:`_PageTooSlow` (Unix, main thread: the reader process).
    Elsewhere the block runs unbounded, and the reader process's limit per file is what stops it."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum: int, _frame: FrameType | None) -> None:
        raise _PageTooSlow

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _declared_pages(reader: Any) -> int | None:
    """The page count the document claims (``/Count`` of its page tree), which costs nothing to read."""
    try:
        count = reader.trailer["/Root"]["/Pages"]["/Count"]
        return int(count)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
