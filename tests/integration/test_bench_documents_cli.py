"""`hearth bench documents` end to end, briefly: the test corpus indexed, two questions answered through the page's
own path and by raw llama.cpp on the same prompt, each step's figures printed and written. (Figures are the
benchmark's job.)"""

from __future__ import annotations

import json
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from tests.helpers import run_hearth

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data"


_hearth = run_hearth


def _kept_bench(home: Path, questions: Path, model: Path, report: Path, *more: str) -> CompletedProcess[str]:
    """`hearth bench documents` of ``questions`` with kept passages, four tokens an answer; it must succeed."""
    ran = _hearth(
        home,
        *("bench", "documents", str(questions), "-c", "corpus", "--max-tokens", "4", "--model", str(model)),
        *("--json", str(report), "--keep-passages", *more),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return ran


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

    # Three runs: cold, again in the same engine, and after a restart on the caches saved to disk. Every prompt of
    # the later runs was read in the first (on this corpus both questions find the same passages): its tokens come
    # from the slot's cache or kept passages, in the same engine and from the disk after the restart.
    runs = tmp_path / "runs.json"
    ran = _hearth(
        isolated_home,
        *("bench", "documents", str(DATA / "retrieval-qa.jsonl"), "-c", "corpus", "--limit", "2"),
        *("--max-tokens", "4", "--model", str(embedded_model), "--json", str(runs), "--keep-passages"),
        *("--runs", "cold,again,restart"),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "again run:" in ran.stdout and "restart run:" in ran.stdout and "starting it again" in ran.stderr
    written = json.loads(runs.read_text())["runs"]
    assert list(written) == ["cold", "again", "restart"]
    cold, again, restart = (written[name]["samples"] for name in ("cold", "again", "restart"))
    assert [s["question"] for s in again] == [s["question"] for s in cold] == [s["question"] for s in restart]
    for sample in (*again, *restart):
        reused = sample["cached_tokens"] + sample["joined_tokens"]
        assert reused > 0.9 * sample["prompt_tokens"], sample  # read before: not read again
        assert sample["raw_time_to_first_token_ms"] > 0
    assert restart[0]["cached_tokens"] + restart[0]["joined_tokens"] > cold[0]["cached_tokens"]
    assert not cold[0]["read_before"] and all(s["read_before"] for s in (*again, *restart))
    assert "passages had all been read before: 2 of 2" in ran.stdout
    # A follow-up about another file in one conversation, passages kept: the first turn's prompt (its passages
    # cut where that turn cut them) still comes from the slot's cache, as without kept passages.
    two = tmp_path / "two-files.jsonl"
    asked = ("Who designed the Skerry lighthouse?", "How many hours of sun do tomato plants need?")
    two.write_text("".join(json.dumps({"question": question}) + "\n" for question in asked))
    followed = tmp_path / "followed.json"
    ran = _kept_bench(isolated_home, two, embedded_model, followed, "--conversation")
    first, follow = json.loads(followed.read_text())["samples"]
    assert follow["cached_tokens"] >= first["prompt_tokens"], (first, follow)
    # A warm run: the same engine asked the first questions again in other words, after a cold run read their
    # passages; the passages come from the slot's cache or are joined from kept caches, not read again.
    reworded = tmp_path / "reworded.jsonl"
    other_words = ("Skerry lighthouse: who was its designer?", "Tomato plants: how much sun a day do they want?")
    reworded.write_text("".join(json.dumps({"question": question}) + "\n" for question in other_words))
    warm = tmp_path / "warm.json"
    warm_run = ("--runs", "cold,warm", "--warm-questions", str(reworded))
    ran = _kept_bench(isolated_home, two, embedded_model, warm, *warm_run)
    assert "warm run:" in ran.stdout
    written = json.loads(warm.read_text())["runs"]
    cold, warmed = written["cold"]["samples"], written["warm"]["samples"]
    assert [s["question"] for s in warmed] == list(other_words)
    for before, after in zip(cold, warmed, strict=True):
        assert after["joined_tokens"] + after["cached_tokens"] > before["joined_tokens"] + before["cached_tokens"]
        assert after["joined_tokens"] + after["cached_tokens"] > 0.6 * after["prompt_tokens"], after
    wrong = _hearth(isolated_home, "bench", "documents", str(two), "-c", "corpus", "--runs", "cold,warm")
    assert wrong.returncode == 1 and "--warm-questions" in wrong.stderr
    wrong = _hearth(isolated_home, "bench", "documents", str(DATA / "retrieval-qa.jsonl"), "-c", "x", "--runs", "hot")
    assert wrong.returncode == 2 and "runs are cold, again, warm, restart" in wrong.stderr

    missing = _hearth(isolated_home, "bench", "documents", str(DATA / "retrieval-qa.jsonl"), "-c", "nowhere")
    assert missing.returncode == 1 and "nowhere" in missing.stderr
