"""Progress that keeps moving while a step reports nothing: each step, then its seconds ticking."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest

from app.ui.elapsed import Tick, with_elapsed
from models.shared.errors import HearthError


def test_a_silent_step_keeps_ticking_until_the_next_one() -> None:
    release = threading.Event()

    def steps() -> Iterator[str]:
        yield "Compiling"
        release.wait(30)  # a compile that says nothing until it is done
        yield "Model ready"

    seconds = itertools.count(100)  # a clock that moves one second per reading
    ticks = with_elapsed(steps(), every_s=0.01, clock=lambda: float(next(seconds)))
    assert next(ticks) == Tick("Compiling", 0)
    waiting = [next(ticks) for _ in range(3)]
    assert [t.step for t in waiting] == ["Compiling"] * 3
    assert [t.elapsed_s for t in waiting] == sorted({t.elapsed_s for t in waiting}) and waiting[0].elapsed_s > 0
    release.set()
    rest = list(ticks)
    assert rest[-1] == Tick("Model ready", 0)
    assert all(t.step == "Compiling" for t in rest[:-1])


def test_the_steps_error_is_raised_in_the_callers_thread() -> None:
    def steps() -> Iterator[str]:
        yield "Reading the model file"
        raise HearthError("There is no NVIDIA GPU.", "Pick another backend.")

    ticks = with_elapsed(steps(), every_s=0.01)
    assert next(ticks).step == "Reading the model file"
    with pytest.raises(HearthError, match="no NVIDIA GPU"):
        list(ticks)


def test_a_step_list_that_ends_ends_the_ticks() -> None:
    assert [t.step for t in with_elapsed(iter(["a", "b"]), every_s=5)] == ["a", "b"]
