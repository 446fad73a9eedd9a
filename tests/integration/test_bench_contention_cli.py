"""`hearth bench contention` end to end, briefly: the embedded model answers alone, a text file is indexed alone,
then both at once with and without the cores shared; each phase printed and written. (Figures are the
benchmark's job.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_hearth

pytestmark = pytest.mark.integration


def _long_text(path: Path) -> Path:
    """A plain-text file long enough that short answers end while it is indexed (about 100 passages)."""
    paragraphs = [
        f"Section {n}. The keeper of light {n} logged the tide at {n % 12 + 1} o'clock, trimmed wick number {n * 7}, "
        f"and noted that the beam reached {n % 30 + 5} nautical miles across the bay that night. " * 3
        for n in range(200)
    ]
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")
    return path


def test_the_contention_benchmark_measures_each_side_alone_and_together(
    embedded_model: Path, isolated_home: Path, tmp_path: Path
) -> None:
    report = tmp_path / "contention.json"
    document = _long_text(tmp_path / "logbook.txt")
    ran = run_hearth(
        isolated_home,
        *("bench", "contention", str(document), "--answers", "1", "--max-tokens", "16"),
        *("--model", str(embedded_model), "--json", str(report)),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "bench: indexing while answering, the cores shared" in ran.stderr
    assert "together, cores shared: answers at " in ran.stdout
    written = json.loads(report.read_text())
    phases = written["phases"]
    assert list(phases) == ["answers alone", "indexing alone", "together, cores shared", "together, not shared"]
    assert phases["answers alone"]["decode_median"] > 0 and phases["indexing alone"]["chunks"] > 0
    for name in ("together, cores shared", "together, not shared"):
        assert phases[name]["index_s"] > 0 and phases[name]["chunks"] == phases["indexing alone"]["chunks"]
        assert phases[name]["decode_tokens_per_s"], "no answer ended while the file was indexed"
    assert not (isolated_home / "index.db").exists() and not (isolated_home / "vectors").exists()  # scratch

    missing = run_hearth(isolated_home, "bench", "contention", str(tmp_path / "none.pdf"))
    assert missing.returncode == 1 and "is not a file" in missing.stderr
