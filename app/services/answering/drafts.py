"""When an answer being written is saved: every couple of seconds, so that if Hearth is killed mid-answer (the
power goes, the OOM killer, `kill -9`) the conversation keeps what was written up to then. Pure; the clock is
passed in."""

from __future__ import annotations

import time
from collections.abc import Callable

# At most this much of an answer is lost when Hearth is killed while writing it.
DRAFT_EVERY_S = 2.0
# The finish reason a saved draft carries until the answer ends; one that still says so after a restart was cut
# off by the kill.
INTERRUPTED = "interrupted"


class DraftSchedule:
    def __init__(self, every_s: float = DRAFT_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._every_s = every_s
        self._clock = clock
        self._last = clock()

    def due(self) -> bool:
        """Whether the text written so far should be saved now (then it counts as saved)."""
        now = self._clock()
        if now - self._last < self._every_s:
            return False
        self._last = now
        return True
