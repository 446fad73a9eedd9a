"""Decouple the model from the page: generation runs in its own thread and the page gets batches of events.

Gradio pulls a generator one item at a time and sends the whole chat after each item; with a model producing
a token every few milliseconds, pulling token by token would make the model wait on the browser. Here a
producer thread drains the events into a queue at full speed, and the page receives everything that arrived
since its last update, at most every ``interval_s``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class _Done:
    error: BaseException | None = None


class BatchedStream(Generic[T]):
    def __init__(
        self, events: Iterator[T], interval_s: float, on_abandon: Callable[[], None], eager_events: int = 2
    ) -> None:
        """``eager_events``: how many leading events are each sent the moment they arrive. For a chat turn, 2
        covers the turn header and the first token, so batching never adds to time to first token."""
        self._events = events
        self._eager_events = eager_events
        self._interval_s = interval_s
        self._on_abandon = on_abandon
        self._queue: queue.SimpleQueue[T | _Done] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._produce, name="hearth-generate", daemon=True)

    def _produce(self) -> None:
        try:
            for event in self._events:
                self._queue.put(event)
        except BaseException as exc:  # handed to the consumer, which re-raises it in its own thread
            self._queue.put(_Done(exc))
            return
        self._queue.put(_Done())

    def batches(self) -> Iterator[list[T]]:
        """Lists of events: the leading (eager) events one by one, then whatever arrived in each interval."""
        self._thread.start()
        finished = False
        sent = 0
        try:
            while not finished:
                batch, finished, error = self._collect(eager=sent < self._eager_events)
                sent += len(batch)
                if batch:
                    yield batch
                if error is not None:
                    raise error
        finally:
            if not finished:
                # The page went away mid-answer: stop the model; the service keeps what was written.
                self._on_abandon()
                self._thread.join(timeout=5)

    def _collect(self, eager: bool) -> tuple[list[T], bool, BaseException | None]:
        batch: list[T] = []
        item = self._queue.get()
        deadline = time.monotonic() + self._interval_s
        while True:
            if isinstance(item, _Done):
                return batch, True, item.error
            batch.append(item)
            remaining = deadline - time.monotonic()
            if eager or remaining <= 0:
                return batch, False, None
            try:
                item = self._queue.get(timeout=remaining)
            except queue.Empty:
                return batch, False, None
