"""`hearth bench documents` end to end, briefly: the test corpus indexed, two questions answered through the page's
own path and by raw llama.cpp on the same prompt, each step's figures printed and written. (Figures are the
benchmark's job.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_hearth

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data"


_hearth = run_hearth


def test_the_documents_benchmark_times_each_step_against_raw_llama_cpp(
    embedded_model: Path, isolated_home: Path, tmp_path: Path
) -> None:
    ingested = _hearth(isolated_home, "ingest", str(DATA / "corpus"), "-c", "corpus")
    assert ingested.returncode == 0, ingested.stderr[-2000:]
    report = tmp_path / "documents.json"
    ran = _hearth(
        isolated_home,
        *("bench", "documents", str(DATA / "retrieval-qa.jsonl"), "-c", "corpus", "--limit", "2"),
        *("--max-tokens", "8", "--model", str(embedded_model), "--json", str(report), "--conversation"),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "bench: question 2 of 2" in ran.stderr
    assert "[1/2] first token" in ran.stdout and "2 questions from documents" in ran.stdout
    written = json.loads(report.read_text())
    assert written["collection"] == "corpus" and len(written["samples"]) == 2
    for sample in written["samples"]:
        assert sample["prompt_tokens"] > 100  # passages, not a bare question
        assert 0 < sample["prefill_ms"] <= sample["time_to_first_token_ms"] <= sample["total_ms"]
        assert sample["embed_ms"] > 0 and sample["raw_time_to_first_token_ms"] > 0
    assert written["ratios"]["time_to_first_token_ms"]["runs"] == 2
    # asked as a follow-up in the same conversation: the first question's prompt and answer come from the cache
    assert "follow-ups in the same conversation:" in ran.stdout
    first, follow = written["samples"]
    assert follow["cached_tokens"] >= first["prompt_tokens"]
    assert written["follow_ups"]["cached_share"]["median"] > 0.5

    # Kept passages: each question in a new conversation; one that retrieves a passage an earlier one read joins it.
    kept = tmp_path / "kept.json"
    ran = _hearth(
        isolated_home,
        *("bench", "documents", str(DATA / "retrieval-qa.jsonl"), "-c", "corpus", "--limit", "4"),
        *("--max-tokens", "4", "--model", str(embedded_model), "--json", str(kept), "--keep-passages"),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "of them joined from kept passages" in ran.stdout
    samples = json.loads(kept.read_text())["samples"]
    assert samples[0]["joined_tokens"] == 0  # nothing was kept before the first question
    assert any(sample["joined_tokens"] > 0 for sample in samples[1:]), samples
    assert all(sample["cached_tokens"] + sample["joined_tokens"] < sample["prompt_tokens"] for sample in samples)

    missing = _hearth(isolated_home, "bench", "documents", str(DATA / "retrieval-qa.jsonl"), "-c", "nowhere")
    assert missing.returncode == 1 and "nowhere" in missing.stderr
