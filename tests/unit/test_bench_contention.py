"""`hearth bench contention`'s summary: each together-phase's answers and indexing as shares of their speed alone."""

from __future__ import annotations

import pytest

from app.bench.contention import Phase, report_lines, summarise


def test_together_phases_are_compared_with_each_side_alone() -> None:
    phases = {
        "answers alone": Phase([10.0, 12.0, 11.0]),
        "indexing alone": Phase(index_s=20.0, chunks=300),
        "together, cores shared": Phase([6.0, 5.0], index_s=40.0, chunks=300),
        "together, not shared": Phase([1.0], index_s=25.0, chunks=300),
    }
    summary = summarise(phases)
    shared, unshared = summary["together"]["together, cores shared"], summary["together"]["together, not shared"]
    assert shared["decode_vs_alone"] == pytest.approx(5.5 / 11.0) and shared["indexing_vs_alone"] == 0.5
    assert unshared["decode_vs_alone"] == pytest.approx(1 / 11) and unshared["indexing_vs_alone"] == 0.8
    assert set(summary["together"]) == {"together, cores shared", "together, not shared"}  # not the alone ones
    lines = report_lines(summary, "Model", "manual.pdf")
    assert "together, cores shared: answers at 0.50x their speed alone, indexing at 0.50x" in lines
    assert any(line.startswith("answers alone") and line.rstrip().endswith("3") for line in lines)
