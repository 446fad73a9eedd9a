"""This CPU's speed, measured for the tuning estimate by the real torch in a process of its own, kept in the data
folder (the owner's alone) and read back instead of measured again."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.training import tuning_estimate
from app.services.training.tuning_estimate import SPEED_FILE, cpu_speed, estimate_run
from models.tuning.options import TuneOptions
from models.tuning.runs import RunStats
from tests.integration.conftest import as_other


def test_the_speed_is_measured_once_and_then_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = resolve_data_paths(tmp_path)
    measured = cpu_speed(paths, 1)
    assert measured is not None and measured > 1e8  # any CPU does more than 0.1 GFLOP/s in float32 products
    saved = paths.tuning_dir / SPEED_FILE
    assert saved.stat().st_mode & 0o777 == 0o600

    def no_second_measurement(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured again")

    monkeypatch.setattr(tuning_estimate.subprocess, "run", no_second_measurement)
    assert cpu_speed(paths, 1) == measured
    stats = RunStats(total_steps=5, tokens=1400, train=20)
    estimate = estimate_run(paths, "sha", 135_000_000, stats, TuneOptions(batch_size=4), 1)
    assert estimate is not None and estimate.source == "arithmetic" and estimate.steps == 5
    assert estimate.total_s == pytest.approx(estimate.load_s + 5 * estimate.step_s)


def test_a_speed_that_cannot_be_measured_gives_no_estimate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise subprocess.CalledProcessError(1, "python")

    monkeypatch.setattr(tuning_estimate.subprocess, "run", broken)
    paths = resolve_data_paths(tmp_path)
    assert cpu_speed(paths, 2) is None
    assert estimate_run(paths, "sha", 1, RunStats(total_steps=1, tokens=10, train=1), TuneOptions(), 2) is None
    assert not (paths.tuning_dir / SPEED_FILE).exists()


def test_another_account_cannot_read_the_saved_speed(other_account: tuple[int, int], open_folder: Path) -> None:
    paths = resolve_data_paths(open_folder / "home")
    paths.tuning_dir.mkdir(parents=True)
    for folder in (open_folder / "home", paths.tuning_dir):
        folder.chmod(0o755)  # open on purpose: the file itself must refuse
    assert cpu_speed(paths, 1) is not None
    listed = as_other(other_account, "/bin/ls", str(paths.tuning_dir))
    assert listed.returncode == 0 and SPEED_FILE in listed.stdout, listed.stderr
    tried = as_other(other_account, "/bin/cat", str(paths.tuning_dir / SPEED_FILE))
    assert tried.returncode != 0 and "Permission denied" in tried.stderr, tried.stdout + tried.stderr
