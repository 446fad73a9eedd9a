"""Stop strings: end an answer just before the first of them, without ever showing part of one.

Text arrives in pieces, and a stop string can straddle two pieces, so the tail of the text that could still
grow into a stop string is held back until the next piece decides it. Pure; every backend uses it.
"""

from __future__ import annotations

from collections.abc import Sequence


class StopScanner:
    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """The part of ``text`` (with what was held back before) that is safe to show. After a stop string is
        seen, ``stopped`` is true and everything from it on is dropped."""
        if self.stopped:
            return ""
        if not self._stops:
            return text
        buffer = self._held + text
        hits = [index for index in (buffer.find(stop) for stop in self._stops) if index >= 0]
        if hits:
            self.stopped = True
            self._held = ""
            return buffer[: min(hits)]
        keep = self._partial_suffix(buffer)
        self._held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """What is still held back when the answer ends for another reason: it was not a stop string."""
        held, self._held = self._held, ""
        return "" if self.stopped else held

    def _partial_suffix(self, buffer: str) -> int:
        """Length of the longest end of ``buffer`` that is the beginning of some stop string."""
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(buffer)), longest, -1):
                if buffer.endswith(stop[:size]):
                    longest = size
                    break
        return longest
