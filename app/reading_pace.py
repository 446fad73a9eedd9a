"""The wait before a model's first word, in words, from the engine's own reports of how far it has read the prompt
(``backends.base.Reading``): for the page and the terminal alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


def reading_line(what: str, done: int, total: int, left_s: float | None) -> str:
    """ "Reading your question and 3 passages: 1,024 of 2,731 tokens, about 20 s left…" (no estimate yet: none)."""
    left = ""
    if left_s is not None:
        left = f", about {left_s:.0f} s left" if left_s < 90 else f", about {left_s / 60:.0f} min left"
    return f"Reading {what}: {done:,} of {total:,} tokens{left}…"


@dataclass
class ReadingPace:
    """The time left to read a prompt, at the pace measured since the first report of it."""

    clock: Callable[[], float] = time.monotonic
    first: tuple[float, int] | None = None  # when the first report came, and how far it said

    def line(self, what: str, done: int, total: int) -> str:
        return reading_line(what, done, total, self.left_s(done, total))

    def left_s(self, done: int, total: int) -> float | None:
        now = self.clock()
        if self.first is None or done <= self.first[1]:  # the first report, or another prompt's
            self.first = (now, done)
            return None
        began, then = self.first
        pace = (done - then) / max(now - began, 1e-6)
        return (total - done) / pace
