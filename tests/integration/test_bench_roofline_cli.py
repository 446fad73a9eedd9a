"""`hearth bench roofline` end to end, briefly: it reads this machine's memory bandwidth, measures raw llama.cpp and
Hearth on the embedded model and writes each as a share of the ceiling. (Figures are the benchmark's job.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_the_roofline_reports_bandwidth_bytes_per_token_and_shares(
    embedded_model: Path, isolated_home: Path, tmp_path: Path
) -> None:
    report = tmp_path / "roofline.json"
    command = ["bench", "roofline", "--runs", "1", "--max-tokens", "8", "--model", str(embedded_model)]
    ran = subprocess.run(
        [sys.executable, "-m", "app", *command, "--json", str(report)],
        env={**os.environ, "HEARTH_HOME": str(isolated_home)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "memory read bandwidth:" in ran.stdout and "SmolLM2-135M-Instruct" in ran.stdout
    written = json.loads(report.read_text())
    assert written["bandwidth_bytes_per_s"] > 1e8
    (row,) = written["rows"]
    # a share of the ceiling, each side's own (a model that fits in the CPU's cache may even pass it)
    assert row["raw_share"] == pytest.approx(row["raw_tokens_per_s"] / row["ceiling_tokens_per_s"])
    assert row["hearth_share"] == pytest.approx(row["hearth_tokens_per_s"] / row["ceiling_tokens_per_s"])
    assert row["raw_tokens_per_s"] > 0 and row["hearth_tokens_per_s"] > 0
    assert row["bytes_per_token"] > 50 << 20  # the embedded model's layers and output: tens of MiB a token
