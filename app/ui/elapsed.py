"""Progress that keeps moving: a step that reports nothing for a while (OpenVINO compiling a model, llama.cpp
mapping a large file) still shows its seconds ticking, so the page never looks frozen."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
TICK_S = 1.0


@dataclass(frozen=True)
class Tick(Generic[T]):
    """The latest step (None before the first) and the whole seconds since it began."""

    step: T | None
    elapsed_s: int


@dataclass(frozen=True)
class _Step(Generic[T]):
    value: T


@dataclass(frozen=True)
class _Failed:
    error: BaseException


@dataclass(frozen=True)
class _Done:
    pass


def with_elapsed(
    steps: Iterator[T], every_s: float = TICK_S, clock: Callable[[], float] = time.monotonic
) -> Iterator[Tick[T]]:
    """Run ``steps`` in a thread of its own and yield a :class:`Tick` for each new step and every ``every_s``
    in between. The steps' own exception is raised here, in the caller's thread, when they fail."""
    handoff: queue.SimpleQueue[_Step[T] | _Failed | _Done] = queue.SimpleQueue()

    def run() -> None:
        try:
            for step in steps:
                handoff.put(_Step(step))
        except BaseException as exc:  # re-raised in the caller's thread
            handoff.put(_Failed(exc))
        else:
            handoff.put(_Done())

    threading.Thread(target=run, name="hearth-elapsed", daemon=True).start()
    current: T | None = None
    began = clock()
    while True:
        try:
            item = handoff.get(timeout=every_s)
        except queue.Empty:
            yield Tick(current, int(clock() - began))
            continue
        if isinstance(item, _Done):
            return
        if isinstance(item, _Failed):
            raise item.error
        current, began = item.value, clock()
        yield Tick(current, 0)
