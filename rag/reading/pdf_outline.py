"""A PDF's bookmarks (its outline) as section names for the text of its pages, and its running headers removed.

Each bookmark points at the page its heading is on. The text of that page is cut where the heading's line is found
(a number such as "3.2.5.2" may precede the title), so the text above it keeps the previous heading's path; a
heading whose line is not found applies from where the page's text has got to. Reading stops after
``max_entries`` bookmarks or below ``MAX_DEPTH`` levels; the caller bounds the time it takes.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rag.reading.sections import Section, heading_text

log = logging.getLogger(__name__)

PATH_SEPARATOR = " › "
# A first or last line repeated (numbers aside) on this share of the pages, and on at least RUNNING_MIN_PAGES, is a
# running header or footer.
RUNNING_SHARE = 0.05
RUNNING_MIN_PAGES = 3
_DIGITS = re.compile(r"\d+")
# A piece that is only a page number ("12", "- 12 -", "xiv") on an otherwise empty page.
_PAGE_NUMBER = re.compile(r"[\W_]*(?:\d+|[ivxlc]+)[\W_]*", re.IGNORECASE)
MAX_DEPTH = 12
# A section number before a heading's title on its line: "3.2.5.2 ", "A.1 ", "7. ".
_NUMBER = r"(?:[A-Z]?\d+(?:\.\d+)*\.?\s+)?"


@dataclass(frozen=True)
class Bookmark:
    page_index: int  # 0-based
    depth: int  # 0 for a top-level bookmark
    title: str


class Outline:
    """Bookmarks in reading order; :meth:`split_page` is called for each page in turn."""

    def __init__(self, bookmarks: Sequence[Bookmark]) -> None:
        self._by_page: dict[int, list[Bookmark]] = defaultdict(list)
        for bookmark in bookmarks:
            self._by_page[bookmark.page_index].append(bookmark)
        self._path: list[tuple[int, str]] = []

    def split_page(self, text: str, page_number: int) -> list[Section]:
        """The sections of page ``page_number`` (1-based), named by the bookmark path in effect at each point; a
        heading with no text after it on this page gives no section of its own (its path names what follows)."""
        pieces: list[Section] = []
        cursor = body = 0  # where the current piece starts, and where its text after its heading line starts
        for bookmark in self._by_page.get(page_number - 1, []):
            found = _heading_line(bookmark.title).search(text, cursor)
            if found is not None:
                if text[body : found.start()].strip():
                    pieces.append(Section(text[cursor : found.start()].strip(), page=page_number, section=self.name))
                cursor, body = found.start(), found.end()
            while self._path and self._path[-1][0] >= bookmark.depth:
                self._path.pop()
            self._path.append((bookmark.depth, bookmark.title))
        if text[body:].strip():
            pieces.append(Section(text[cursor:].strip(), page=page_number, section=self.name))
        return [piece for piece in pieces if not _PAGE_NUMBER.fullmatch(piece.text)]

    @property
    def name(self) -> str | None:
        return PATH_SEPARATOR.join(title for _, title in self._path) or None


def _heading_line(title: str) -> re.Pattern[str]:
    words = r"\s+".join(re.escape(word) for word in title.split())
    return re.compile(rf"^[ \t]*{_NUMBER}{words}[ \t]*$", re.MULTILINE)


def read_outline(reader: Any, max_entries: int) -> Outline:
    """The bookmarks of a pypdf ``PdfReader``, in reading order; none where they cannot be read."""
    from pypdf.errors import PyPdfError

    bookmarks: list[Bookmark] = []
    try:
        # pypdf's outline: a list of entries, each followed by a list of its children (nested lists).
        stack: list[tuple[Any, int]] = [(reader.outline, 0)]
        while stack and len(bookmarks) < max_entries:
            items, depth = stack.pop()
            if depth > MAX_DEPTH:
                continue
            for position, item in enumerate(items):
                if isinstance(item, list):
                    # Children are read before the entries that follow them: keep the rest for later.
                    stack.append((items[position + 1 :], depth))
                    stack.append((item, depth + 1))
                    break
                page = reader.get_destination_page_number(item)
                title = heading_text(str(getattr(item, "title", "") or ""))
                if page is not None and page >= 0 and title:
                    bookmarks.append(Bookmark(page, depth, title))
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
        log.debug("the PDF's bookmarks cannot be read", exc_info=True)
        return Outline([])
    return Outline(bookmarks)


def without_running_lines(pages: Sequence[str]) -> list[str]:
    """The pages' texts without their running headers and footers: a first or last line that recurs, numbers
    aside ("Chapter 3: Basic Shell Features 14", "Page 7 of 90"), on many pages."""
    counts: dict[str, int] = defaultdict(int)
    for text in pages:
        lines = text.strip().splitlines()
        # A one-line page has no header or footer to tell apart from its text: it never votes and is never cut.
        for line in {lines[0], lines[-1]} if len(lines) > 1 else set():
            counts[_shape(line)] += 1
    needed = max(RUNNING_MIN_PAGES, RUNNING_SHARE * len(pages))
    running = {shape for shape, count in counts.items() if count >= needed and shape}
    if not running:
        return list(pages)
    cleaned = []
    for text in pages:
        lines = text.strip().splitlines()
        if len(lines) == 1 and lines[0].strip().isdigit():
            lines = []  # a page that holds only its number
        if len(lines) < 2:
            cleaned.append("\n".join(lines))
            continue
        if _shape(lines[0]) in running:
            lines = lines[1:]
        if lines and _shape(lines[-1]) in running:
            lines = lines[:-1]
        cleaned.append("\n".join(lines))
    return cleaned


def _shape(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split()))
