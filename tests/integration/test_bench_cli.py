"""`hearth bench chat` as a user runs it: real subprocess, the real embedded model on both sides, a short run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.timeout(900)  # a busy 2-core machine; the run itself is a few short answers
def test_bench_chat_shows_progress_and_the_spread_of_its_runs(
    isolated_home: Path, embedded_model: Path, tmp_path: Path
) -> None:
    report = tmp_path / "bench.json"
    args = ["bench", "chat", "--runs", "3", "--max-tokens", "4", "--model", str(embedded_model), "--json", str(report)]
    result = subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        timeout=850,
        env=os.environ | {"HEARTH_HOME": str(isolated_home)},
    )
    assert result.returncode == 0, result.stderr
    progress = result.stderr
    phases = ["loading the model into Hearth", "opening raw llama-cpp-python", "warming up both sides"]
    runs = [f"run {k} of 3: {side}" for k in (1, 2, 3) for side in ("raw llama-cpp-python", "Hearth")]
    positions = [progress.index(f"bench: {line}") for line in phases + runs]
    assert positions == sorted(positions)  # each phase announced as it starts, in order
    assert progress.count("(Hearth/raw ") == 3  # each run's own ratio as it finishes

    out = result.stdout
    assert "Hearth/raw per run, each against the raw answer of the same round:" in out
    decode_line = next(
        line for line in out.splitlines() if line.strip().startswith("decode tokens/s") and "IQR" in line
    )
    assert "min–max" in decode_line and "3 runs" in decode_line
    spread = json.loads(report.read_text())["ratio_spread"]["decode_tokens_per_s"]
    assert spread["runs"] == 3 and spread["low"] <= spread["q1"] <= spread["median"] <= spread["q3"] <= spread["high"]
    warned = "the decode tokens/s ratio varies by" in out
    assert warned == (spread["high"] - spread["low"] > 0.2 * spread["median"])  # a wide spread is always flagged


def test_bench_chat_refuses_a_run_count_below_one(isolated_home: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "bench", "chat", "--runs", "0"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--runs: must be 1 or more, not 0" in result.stderr and "Traceback" not in result.stderr
