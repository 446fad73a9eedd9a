"""What reading a file gives: sections of text with their place, or a refusal with a reason a person can act on;
and the running count that stops a reader as soon as a file's text goes over the limit."""

from __future__ import annotations

from dataclasses import dataclass

from rag.limits import ReadLimits, too_much_text


class Skipped(Exception):
    """This file was not indexed; ``reason`` says why and what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Section:
    text: str
    page: int | None = None  # 1-based, PDF only
    section: str | None = None  # heading path, CSV row, …


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
