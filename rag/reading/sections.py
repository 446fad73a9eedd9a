"""What reading a file gives: sections of text with their place, or a refusal with a reason a person can act on;
and the running count that stops a reader as soon as a file's text goes over the limit."""

from __future__ import annotations

from dataclasses import dataclass

from rag.reading.clean_text import clean_line
from rag.reading.limits import ReadLimits, too_much_text

# Which way of turning files into passages made an index. Raise it whenever the passages a file becomes change
# (text extraction, sections, chunking): files indexed by an older way are read again on the next run, even if
# unchanged. 2: heading paths for HTML, Word, Markdown and bookmarked PDFs, cleaned text, one passage per CSV row.
# 3: PDF words broken at line ends joined, ligatures as letters.
PASSAGE_FORMAT = 3

# Longest section name taken from a document's own title or heading.
MAX_HEADING_CHARS = 200


class Skipped(Exception):
    """This file was not indexed; ``reason`` says why and what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Section:
    text: str
    page: int | None = None  # 1-based, PDF only
    section: str | None = None  # heading path ("Guide › Install"), CSV row, …


class TextBudget:
    """Characters extracted so far from one file. Readers count each piece as they produce it, so a file that
    expands past the limit is refused after reading just past the limit, not after reading all of it."""

    def __init__(self, limits: ReadLimits) -> None:
        self._limits = limits
        self.used = 0

    def take(self, text: str) -> str:
        self.used += len(text)
        if self.used > self._limits.max_text_chars:
            raise Skipped(too_much_text(self._limits))
        return text


def heading_text(raw: str) -> str | None:
    """A section name from a document's own title or heading: markup removed, whitespace collapsed, shortened;
    ``None`` (no name) rather than an empty or placeholder one."""
    if "<" in raw:  # a title parsed as plain text can still hold tags (HTML reads <title> as text)
        from bs4 import BeautifulSoup

        raw = BeautifulSoup(raw, "html.parser").get_text(" ")
    text = clean_line(raw)
    if len(text) > MAX_HEADING_CHARS:
        text = text[: MAX_HEADING_CHARS - 1].rstrip() + "…"
    return text or None
