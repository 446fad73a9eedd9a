"""`hearth bench lookup` end to end, briefly: the test corpus indexed, two questions from it and one open question
answered with and without prompt lookup on the same engine, each printed and written. (Figures are the benchmark's
job.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_hearth

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_lookup_benchmark_answers_each_question_both_ways(
    embedded_model: Path, isolated_home: Path, tmp_path: Path
) -> None:
    ingested = run_hearth(isolated_home, "ingest", str(DATA / "corpus"), "-c", "corpus")
    assert ingested.returncode == 0, ingested.stderr[-2000:]
    report = tmp_path / "lookup.json"
    ran = run_hearth(
        isolated_home,
        *("bench", "lookup", str(DATA / "retrieval-qa.jsonl"), "-c", "corpus", "--limit", "2", "--open", "1"),
        *("--max-tokens", "48", "--model", str(embedded_model), "--json", str(report)),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "bench: question 3 of 3 (open)" in ran.stderr
    assert "answers from documents (2):" in ran.stdout and "open questions (1):" in ran.stdout
    written = json.loads(report.read_text())
    assert [s["kind"] for s in written["samples"]] == ["documents", "documents", "open"]
    for sample in written["samples"]:
        assert sample["plain_tokens_per_s"] > 0 and sample["lookup_tokens_per_s"] > 0
        assert 0 <= sample["accepted"] <= sample["drafted"]
    assert sum(s["drafted"] for s in written["samples"][:2]) > 0  # the passages gave something to guess from
    assert written["kinds"]["documents"]["ratio"]["runs"] == 2

    missing = run_hearth(isolated_home, "bench", "lookup", str(DATA / "retrieval-qa.jsonl"), "-c", "nowhere")
    assert missing.returncode == 1 and "nowhere" in missing.stderr
