"""When to restart an engine that died, and when to stop trying. Pure: the runtime passes the clock in."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    delay_s: float = 0.0
    reason: str = ""


class RestartPolicy:
    """A crash while answering restarts the engine at once. A crash while it loads again is retried with a
    growing pause (1, 2, 4 s…) and given up after ``max_load_crashes`` in a row: a model that aborts at every
    load would otherwise restart forever. Too many crashes in ``window_s`` also stop the retries."""

    def __init__(
        self, max_load_crashes: int = 3, max_crashes: int = 5, window_s: float = 600.0, first_delay_s: float = 1.0
    ) -> None:
        self.first_delay_s = first_delay_s
        self.max_load_crashes = max_load_crashes
        self.max_crashes = max_crashes
        self.window_s = window_s
        self._load_crashes = 0
        self._recent: deque[float] = deque()

    def after_crash(self, now_s: float, while_loading: bool) -> RestartDecision:
        self._recent.append(now_s)
        while self._recent and now_s - self._recent[0] > self.window_s:
            self._recent.popleft()
        if while_loading:
            self._load_crashes += 1
            if self._load_crashes >= self.max_load_crashes:
                return RestartDecision(False, reason=f"it crashed {self._load_crashes} times in a row while loading")
            return RestartDecision(True, delay_s=self.first_delay_s * 2 ** (self._load_crashes - 1))
        if len(self._recent) >= self.max_crashes:
            minutes = round(self.window_s / 60)
            window = "a minute" if minutes == 1 else f"{minutes} minutes"
            return RestartDecision(False, reason=f"it crashed {len(self._recent)} times within {window}")
        return RestartDecision(True)

    def after_ready(self) -> None:
        self._load_crashes = 0
