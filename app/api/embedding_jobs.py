"""Embedding requests as jobs: a few at a time, computed in slices, stopped when their client leaves or Hearth
stops.

A request may carry 2048 long texts, minutes of work for a laptop's CPU. Computed in one call, it went on after
its client had gone, any number ran at once, and a SIGTERM in the middle ended the process in a native abort (the
interpreter shut down under torch's threads). So each job embeds a slice at a time and checks its cancel token
between slices; at most ``max_in_flight`` run at once (beyond that, 429 with Retry-After); and ``close`` cancels
every job and waits for its thread before the process goes on to exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from backends.base import CancelToken
from models.shared.errors import Busy, HearthError

# Texts embedded per call: about a second of work for 256-token texts on two cores, far less for short ones.
SLICE_TEXTS = 32
MAX_IN_FLIGHT = 2  # a laptop has few cores, and each job already uses all of them
RETRY_AFTER_S = 5
CLOSE_WAIT_S = 30.0


class EmbeddingCancelled(HearthError):
    """The client left, or Hearth is stopping: the rest of the texts were not embedded."""


class EmbeddingJobs:
    def __init__(self, max_in_flight: int = MAX_IN_FLIGHT, slice_texts: int = SLICE_TEXTS) -> None:
        self._max = max_in_flight
        self._slice = slice_texts
        self._lock = threading.Condition()
        self._running: set[CancelToken] = set()
        self._closed = False

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._running)

    @contextmanager
    def admitted(self) -> Iterator[CancelToken]:
        """A cancel token for one job, or :class:`Busy` when ``max_in_flight`` jobs run already."""
        token = CancelToken()
        with self._lock:
            if self._closed:
                raise EmbeddingCancelled("Hearth is stopping.", "Send the request again once it has restarted.")
            if len(self._running) >= self._max:
                raise Busy(
                    f"{len(self._running)} embedding requests are being computed already.",
                    "Send this one again in a few seconds (Retry-After), or fewer texts per request.",
                    retry_after_s=RETRY_AFTER_S,
                )
            self._running.add(token)
        try:
            yield token
        finally:
            with self._lock:
                self._running.discard(token)
                self._lock.notify_all()

    def embed(
        self, embed: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str], cancel: CancelToken
    ) -> np.ndarray:
        """``embed`` over ``texts`` a slice at a time, stopping at the first slice boundary after ``cancel``."""
        parts: list[np.ndarray] = []
        for start in range(0, len(texts), self._slice):
            if cancel.cancelled:
                raise EmbeddingCancelled(
                    f"Stopped after {start} of {len(texts)} texts.", "Send the request again to embed them all."
                )
            parts.append(embed(texts[start : start + self._slice]))
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> bool:
        """Cancel every job, refuse new ones, and wait (at most ``wait_s``) for their threads to finish their
        slice; True when none is left running."""
        with self._lock:
            self._closed = True
            for token in self._running:
                token.cancel()
            return self._lock.wait_for(lambda: not self._running, wait_s)
