"""A run's record on disk: its job, and the events folded into what the page and the CLI show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from models.tuning.options import TuneOptions
from models.tuning.runs import Job, RunError, RunFolder, RunResult, RunStats, StepPoint, fold_events


def step(number: int, at: float, loss: float = 1.0) -> dict[str, Any]:
    return {"kind": "step", "step": number, "loss": loss, "tokens_per_s": 50.0, "at": at}


def stats(total: int) -> dict[str, Any]:
    return {"kind": "stats", "at": 0.0, "total_steps": total, "examples": 12, "train": 11}


def test_nothing_yet_and_alive_is_starting() -> None:
    view = fold_events([], alive=True)
    assert view.state == "starting"
    assert view.step == 0
    assert view.eta_s is None
    assert not view.resumable


def test_a_phase_or_a_step_and_alive_is_running() -> None:
    view = fold_events([{"kind": "started"}, {"kind": "phase", "message": "Loading the model"}], alive=True)
    assert (view.state, view.phase) == ("running", "Loading the model")
    view = fold_events([{"kind": "started"}, stats(10), step(1, 100.0)], alive=True)
    assert view.state == "running"
    assert view.total_steps == 10
    assert view.stats == RunStats(total_steps=10, examples=12, train=11)  # what an event lacks keeps its default
    assert view.steps == (StepPoint(1, 1.0, 50.0, 100.0),)


def test_a_trainer_gone_without_an_end_is_interrupted() -> None:
    events = [{"kind": "started"}, stats(10), step(1, 1.0), step(2, 2.0)]
    view = fold_events(events, alive=False)
    assert view.state == "interrupted"
    assert not view.resumable
    view = fold_events([*events, {"kind": "checkpoint", "step": 2}], alive=False)
    assert view.state == "interrupted"
    assert view.checkpoint_step == 2
    assert view.resumable


def test_a_finished_run_keeps_its_result() -> None:
    finished = {"kind": "finished", "at": 3.0, "adapter": "mine", "perplexity_after": 4.5, "unknown": 1}
    events = [stats(2), step(1, 1.0), step(2, 2.0), finished]
    view = fold_events(events, alive=False)
    assert view.state == "finished"
    assert view.result == RunResult(adapter="mine", perplexity_after=4.5)  # a field it does not know is left out
    assert not view.resumable
    # The end event wins even while the process is still exiting.
    assert fold_events(events, alive=True).state == "finished"


def test_a_failed_run_keeps_its_error() -> None:
    events = [{"kind": "checkpoint", "step": 10}, {"kind": "failed", "message": "Disk full.", "extra": 1}]
    view = fold_events(events, alive=False)
    assert view.state == "failed"
    assert view.error == RunError("Disk full.", "")
    assert view.resumable


def test_cancelled_and_a_restart_after_it() -> None:
    events: list[dict[str, Any]] = [{"kind": "checkpoint", "step": 10}, {"kind": "cancelled"}]
    assert fold_events(events, alive=False).state == "cancelled"
    assert fold_events(events, alive=False).resumable
    failed = [{"kind": "failed", "message": "m", "remedy": "r"}]
    view = fold_events([*failed, {"kind": "started"}], alive=True)
    assert view.state == "starting"
    assert view.error is None


def test_held_out_losses_are_sorted_and_a_step_measured_again_keeps_the_latest() -> None:
    events = [
        {"kind": "held_out", "step": 20, "loss": 2.0},
        {"kind": "held_out", "step": 0, "loss": 3.0},
        {"kind": "held_out", "step": 10, "loss": 2.5},
        {"kind": "held_out", "step": 20, "loss": 1.9},
    ]
    assert fold_events(events, alive=True).held_out == ((0, 3.0), (10, 2.5), (20, 1.9))


def test_steps_taken_again_after_a_resume_replace_the_old_ones() -> None:
    first_sitting = [{"kind": "started"}, stats(100), *(step(n, 10.0 * n) for n in range(1, 6))]
    first_sitting.append({"kind": "checkpoint", "step": 3})
    # Killed after step 5; the second sitting resumes from the checkpoint at step 3, at its own pace.
    second_sitting = [{"kind": "started"}, step(4, 1000.0, loss=0.4), step(5, 1002.0, loss=0.5), step(6, 1004.0)]
    view = fold_events(first_sitting + second_sitting, alive=True)
    assert [p.step for p in view.steps] == [1, 2, 3, 4, 5, 6]
    assert [p.loss for p in view.steps[3:5]] == [0.4, 0.5]
    assert view.step == 6
    assert view.sitting_from == 3
    # Two seconds a step in this sitting (not the first sitting's ten, nor the gap between them).
    assert view.eta_s == pytest.approx((100 - 6) * 2.0)


def test_eta_needs_two_steps_in_this_sitting() -> None:
    assert fold_events([stats(10), step(1, 5.0)], alive=True).eta_s is None
    view = fold_events([stats(10), step(1, 5.0), step(2, 7.0), {"kind": "started"}, step(3, 50.0)], alive=True)
    assert view.sitting_from == 2
    assert view.eta_s is None
    assert fold_events([stats(10), step(1, 5.0), step(3, 9.0)], alive=True).eta_s == pytest.approx(7 * 2.0)


def test_eta_needs_a_total() -> None:
    assert fold_events([step(1, 5.0), step(2, 7.0)], alive=True).eta_s is None


def test_a_job_survives_json() -> None:
    job = Job(
        adapter_name="facts",
        base_path="/models/base.gguf",
        base_sha256="ab" * 32,
        base_name="Base 1B",
        data_label="facts.jsonl",
        options=TuneOptions(rank=8, targets=("q_proj", "v_proj"), max_steps=20),
        threads=4,
        adapters_dir="/data/adapters",
        created_at=123.5,
    )
    back = Job.from_json(job.to_json())
    assert back == job
    assert back.options.targets == ("q_proj", "v_proj")
    assert isinstance(back.options.targets, tuple)


def test_events_are_appended_and_read_back(tmp_path: Path) -> None:
    run = RunFolder(tmp_path / "run-1")
    run.path.mkdir()
    assert list(run.events()) == []
    run.append("started")
    run.append("step", step=1, loss=2.5, tokens_per_s=10.0)
    events = list(run.events())
    assert [e["kind"] for e in events] == ["started", "step"]
    assert events[1]["loss"] == 2.5
    assert all(isinstance(e["at"], float) for e in events)
    assert run.id == "run-1"


def test_a_half_written_last_line_is_skipped(tmp_path: Path) -> None:
    run = RunFolder(tmp_path)
    run.append("started")
    run.append("phase", message="Training")
    with run.events_file.open("a", encoding="utf-8") as handle:
        handle.write('{"kind": "step", "st')
    assert [e["kind"] for e in run.events()] == ["started", "phase"]
    assert fold_events(list(run.events()), alive=True).state == "running"
