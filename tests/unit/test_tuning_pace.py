"""Training tokens per second leave the held-out evaluations out of both the tokens and the time."""

from __future__ import annotations

import pytest

from models.tuning.pace import TrainingPace


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_tokens_over_training_time() -> None:
    clock = Clock()
    pace = TrainingPace(clock)
    pace.trained(1000)
    clock.now += 4.0
    assert pace.per_second == pytest.approx(250.0)


def test_an_evaluation_counts_neither_tokens_nor_time() -> None:
    clock = Clock()
    pace = TrainingPace(clock)
    pace.trained(1000)
    clock.now += 4.0
    pace.pause()  # evaluation batches
    pace.pause()  # a second batch of the same evaluation changes nothing
    clock.now += 10.0
    assert pace.per_second == pytest.approx(250.0)  # read during the evaluation: its time is not counted
    pace.trained(1000)  # the next training batch resumes the clock
    clock.now += 4.0
    assert pace.per_second == pytest.approx(250.0)


def test_the_trainer_s_after_evaluation_hook_resumes_too_and_restart_forgets_everything() -> None:
    clock = Clock()
    pace = TrainingPace(clock)
    pace.pause()
    clock.now += 5.0
    pace.resume()
    pace.resume()
    pace.trained(300)
    clock.now += 3.0
    assert pace.per_second == pytest.approx(100.0)
    pace.restart()
    assert pace.tokens == 0 and pace.per_second == 0.0
