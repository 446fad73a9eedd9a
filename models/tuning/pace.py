"""Training tokens per second: the tokens of training batches over the time spent training, the held-out
evaluations left out of both (an evaluation batch is a forward pass only, several times faster than a training
step, and counting it made the figure read 22-29% high in `bench/tuning.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable


class TrainingPace:
    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.restart()

    def restart(self) -> None:
        self.tokens = 0
        self._started = self._clock()
        self._paused_at: float | None = None
        self._paused_s = 0.0

    def trained(self, tokens: int) -> None:
        """A training batch of ``tokens`` is about to run: the clock runs again if an evaluation had paused it."""
        self.resume()
        self.tokens += tokens

    def pause(self) -> None:
        """An evaluation starts: its time is not training time."""
        if self._paused_at is None:
            self._paused_at = self._clock()

    def resume(self) -> None:
        if self._paused_at is not None:
            self._paused_s += self._clock() - self._paused_at
            self._paused_at = None

    @property
    def per_second(self) -> float:
        now = self._paused_at if self._paused_at is not None else self._clock()
        elapsed = now - self._started - self._paused_s
        return self.tokens / elapsed if elapsed > 0 else 0.0
