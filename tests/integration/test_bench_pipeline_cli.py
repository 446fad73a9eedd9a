"""`hearth bench pipeline` end to end, briefly: it starts its own loopback workers, measures the three plans and writes
the table, the JSON and the chart. (Figures are not checked: that is the benchmark's job on a quiet machine.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_the_benchmark_measures_each_plan_and_writes_its_files(
    embedded_model: Path, isolated_home: Path, tmp_path: Path
) -> None:
    report, chart = tmp_path / "pipeline.json", tmp_path / "pipeline.png"
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "bench",
            "pipeline",
            "--users",
            "1,2",
            "--runs",
            "1",
            "--max-tokens",
            "8",
            "--json",
            str(report),
            "--chart",
            str(chart),
        ],
        env={**os.environ, "HEARTH_HOME": str(isolated_home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    summary = json.loads(report.read_text())
    plans = [(row["plan"], row["users"]) for row in summary["rows"]]
    assert plans == [
        ("one process", 1),
        ("one process", 2),
        ("split (Hearth)", 1),
        ("split (Hearth)", 2),
        ("split (llama.cpp RPC, direct)", 1),
    ]
    split = next(row for row in summary["rows"] if row["plan"] == "split (Hearth)")
    assert split["aggregate_tokens_per_s"] > 0 and split["bytes_per_token"] > 0
    # CPU workers: the output projection runs here, so a token's logits (49,152 floats) never cross the links; with
    # them, each token would carry at least that much (the prompt's hidden states add some per token here)
    logits = 49_152 * 4
    assert split["bytes_per_token"] < logits
    raw = next(row for row in summary["rows"] if row["plan"] == "split (llama.cpp RPC, direct)")
    assert raw["bytes_per_token"] < logits  # placed as Hearth places it
    assert summary["split_vs_one_process"]["runs"] == 1
    assert "energy" in ran.stdout and "split / raw RPC" in ran.stdout
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (isolated_home / "cache").exists()  # the workers kept their caches in the benchmark's own folder
