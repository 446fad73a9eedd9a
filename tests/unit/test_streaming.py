import threading
import time
from collections.abc import Iterator

import pytest

from app.ui.streaming import BatchedStream


def slow(count: int, delay_s: float) -> Iterator[int]:
    for index in range(count):
        time.sleep(delay_s)
        yield index


def test_every_event_arrives_once_in_order_and_in_fewer_updates() -> None:
    batches = list(BatchedStream(slow(40, 0.002), interval_s=0.03, on_abandon=lambda: None).batches())
    assert [event for batch in batches for event in batch] == list(range(40))
    assert batches[:2] == [[0], [1]]  # the turn header and the first token are shown at once
    assert len(batches) < 40


def test_an_error_reaches_the_consumer_after_the_events_before_it() -> None:
    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("engine died")

    seen: list[int] = []
    with pytest.raises(ValueError, match="engine died"):
        for batch in BatchedStream(failing(), interval_s=0.01, on_abandon=lambda: None).batches():
            seen.extend(batch)
    assert seen == [1]


def test_an_error_before_the_first_event_is_raised_first() -> None:
    def refused() -> Iterator[int]:
        raise LookupError("too long")
        yield 0

    with pytest.raises(LookupError):
        next(BatchedStream(refused(), interval_s=0.01, on_abandon=lambda: None).batches())


def test_walking_away_stops_the_producer() -> None:
    stop = threading.Event()

    def endless() -> Iterator[int]:
        index = 0
        while not stop.is_set():
            time.sleep(0.001)
            index += 1
            yield index

    batches = BatchedStream(endless(), interval_s=0.01, on_abandon=stop.set).batches()
    next(batches)
    next(batches)
    batches.close()
    assert stop.is_set()
