"""The tuning run's time, estimated before anything loads: the arithmetic (pure), the words the page shows, and
the pace an earlier run of the same model left in its run folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.training.tuning_estimate import earlier_pace
from app.ui.tuning_view import estimate_summary
from models.tuning.estimate import (
    EFFICIENCY,
    FLOPS_PER_PARAMETER_TOKEN,
    STEP_OVERHEAD_S,
    TimeEstimate,
    from_arithmetic,
    from_pace,
    load_seconds,
    tokens_per_step,
)
from models.tuning.options import TuneOptions
from models.tuning.runs import Job, RunFolder


def test_a_step_trains_on_an_epochs_tokens_over_its_steps() -> None:
    assert tokens_per_step(1000, 10, 4) == pytest.approx(1000 / 3)  # 4 + 4 + 2 examples: three steps an epoch
    assert tokens_per_step(500, 2, 4) == 500  # one short step
    assert tokens_per_step(0, 0, 4) == 0


def test_the_arithmetic_is_four_operations_per_parameter_and_token_at_the_measured_efficiency() -> None:
    estimate = from_arithmetic(parameters=1_000_000_000, step_tokens=300, steps=5, matmul_flops=200e9)
    computing = 200e9 * EFFICIENCY / (FLOPS_PER_PARAMETER_TOKEN * 1e9)
    assert estimate.step_s == pytest.approx(STEP_OVERHEAD_S + 300 / computing)
    assert estimate.tokens_per_s == pytest.approx(300 / estimate.step_s)
    assert estimate.load_s == pytest.approx(load_seconds(1_000_000_000))
    assert estimate.total_s == pytest.approx(estimate.load_s + 5 * estimate.step_s)
    assert estimate.source == "arithmetic"
    bigger = from_arithmetic(parameters=2_000_000_000, step_tokens=300, steps=5, matmul_flops=200e9)
    assert bigger.step_s - STEP_OVERHEAD_S == pytest.approx(2 * (estimate.step_s - STEP_OVERHEAD_S))
    assert bigger.load_s > estimate.load_s


def test_an_earlier_pace_replaces_the_arithmetic() -> None:
    estimate = from_pace(parameters=135_000_000, step_tokens=250, steps=20, tokens_per_s=125.0)
    assert estimate.step_s == pytest.approx(2.0) and estimate.source == "earlier run"


def test_the_page_says_how_long_and_where_the_figure_comes_from() -> None:
    guessed = estimate_summary(TimeEstimate(60.0, 12.4, 5, 22.7, "arithmetic"))
    assert guessed.startswith("**Time**: about 2 min") and "5 steps of about 12 s" in guessed
    assert "from this computer's speed" in guessed and "Time a few real steps" in guessed
    known = estimate_summary(TimeEstimate(16.0, 1.2, 20, 230.0, "earlier run"))
    assert "at the pace of your last run of this model here, 230 tokens/s" in known and "40 s" in known
    assert "on the GPU" in estimate_summary(None, on_gpu=True)
    assert "could not be measured" in estimate_summary(None)


def _run(tuning_dir: Path, name: str, sha: str, threads: int, where: str, paces: list[float], probe: int = 0) -> None:
    run = RunFolder(tuning_dir / name)
    run.path.mkdir(parents=True)
    job = Job(name, "/m.gguf", sha, "m", "d.jsonl", TuneOptions(), threads, "/a", probe_steps=probe)
    run.job_file.write_text(job.to_json(), encoding="utf-8")
    run.append("phase", message=f"Training {where}")
    for step, pace in enumerate(paces, start=1):
        run.append("step", step=step, loss=1.0, tokens_per_s=pace, elapsed_s=float(step))


def test_the_pace_of_the_newest_cpu_run_of_the_same_model_with_as_many_threads(tmp_path: Path) -> None:
    paths = resolve_data_paths(tmp_path)
    assert earlier_pace(paths, "aaa", 2) is None  # no run yet
    _run(paths.tuning_dir, "20260101-000000-old", "aaa", 2, "on the CPU", [10.0, 100.0, 110.0, 120.0])
    _run(paths.tuning_dir, "20260102-000000-other-model", "bbb", 2, "on the CPU", [500.0, 500.0])
    _run(paths.tuning_dir, "20260103-000000-gpu", "aaa", 2, "on NVIDIA H200 (bfloat16)", [5000.0, 5000.0])
    _run(paths.tuning_dir, "20260104-000000-one-thread", "aaa", 1, "on the CPU", [50.0, 50.0])
    _run(paths.tuning_dir, "20260105-000000-one-step", "aaa", 2, "on the CPU", [70.0])
    _run(paths.tuning_dir, "20260106-000000-probe", "aaa", 2, "on the CPU", [90.0, 90.0], probe=4)
    damaged = paths.tuning_dir / "20260107-000000-damaged"
    damaged.mkdir()
    (damaged / "job.json").write_text("{not json", encoding="utf-8")
    assert earlier_pace(paths, "aaa", 2) == pytest.approx(105.0)  # the median looks past the warm-up step
    assert earlier_pace(paths, "aaa", 1) == pytest.approx(50.0)
    assert earlier_pace(paths, "ccc", 2) is None
