"""The documents benchmark's pure parts: reading a question set, the medians and spreads, and the report."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.bench.documents import read_questions
from app.bench.documents_figures import (
    DocumentsSample,
    follow_up_figures,
    follow_up_lines,
    report_lines,
    summarise,
)
from models.shared.errors import HearthError

SAMPLE = DocumentsSample(
    question="q",
    embed_ms=10.0,
    search_ms=5.0,
    prompt_tokens=900,
    cached_tokens=0,
    prefill_ms=8000.0,
    time_to_first_token_ms=8100.0,
    decode_tokens_per_s=10.0,
    total_ms=20000.0,
    raw_time_to_first_token_ms=8000.0,
    raw_decode_tokens_per_s=10.0,
)


def test_each_questions_ratio_is_against_the_raw_side_of_the_same_question() -> None:
    samples = [
        SAMPLE,
        replace(SAMPLE, time_to_first_token_ms=4000.0, raw_time_to_first_token_ms=2000.0),
        replace(SAMPLE, time_to_first_token_ms=3000.0, raw_time_to_first_token_ms=3000.0, raw_decode_tokens_per_s=0),
    ]
    summary = summarise(samples)
    assert summary["questions"] == 3
    assert summary["figures"]["prompt_tokens"]["median"] == 900
    ttft = summary["ratios"]["time_to_first_token_ms"]
    assert (ttft["low"], ttft["median"], ttft["high"]) == pytest.approx((1.0, 1.0125, 2.0))
    assert summary["ratios"]["decode_tokens_per_s"]["runs"] == 2  # no ratio against a raw side that wrote nothing


def test_the_report_names_every_figure_and_warns_when_the_ratios_disagree() -> None:
    samples = [SAMPLE, replace(SAMPLE, time_to_first_token_ms=16000.0)]
    lines = report_lines(summarise(samples), "Qwen", "llama.cpp (CPU)")
    text = "\n".join(lines)
    assert lines[0] == "Qwen on llama.cpp (CPU): 2 questions from documents"
    for label in ("prefill, ms", "of them from the cache", "raw: decode tokens/s", "time to first token"):
        assert label in text
    assert "warning: the time to first token ratio varies" in text
    with pytest.raises(ValueError):
        summarise([])


def test_the_questions_whose_passages_were_all_read_before_are_figured_apart() -> None:
    samples = [
        SAMPLE,
        replace(SAMPLE, time_to_first_token_ms=1000.0, raw_time_to_first_token_ms=4000.0, read_before=True),
        replace(SAMPLE, time_to_first_token_ms=3000.0, raw_time_to_first_token_ms=3000.0, read_before=True),
    ]
    summary = summarise(samples)
    before = summary["read_before"]
    assert before["questions"] == 2
    assert (before["time_to_first_token_ms"]["low"], before["time_to_first_token_ms"]["high"]) == (1000.0, 3000.0)
    assert (before["against_raw"]["low"], before["against_raw"]["high"]) == pytest.approx((0.25, 1.0))
    text = "\n".join(report_lines(summary, "Qwen", "llama.cpp (CPU)"))
    assert "passages had all been read before: 2 of 3, first token 2.00 s (min–max 1.00–3.00)" in text
    assert "read_before" not in summarise([SAMPLE])  # none read before: no such figure, not a zero


def test_a_question_set_is_read_line_by_line_with_a_clear_error(tmp_path: Path) -> None:
    good = tmp_path / "qa.jsonl"
    good.write_text('{"question": "Who?", "expected": ["x"]}\n\n{"question": "Where?", "gold_file": "a.md"}\n')
    assert read_questions(good) == ["Who?", "Where?"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Who?"}\n{"asked": "no"}\n')
    with pytest.raises(HearthError, match=r'Line 2 of bad\.jsonl has no "question"'):
        read_questions(bad)
    bad.write_text("not json\n")
    with pytest.raises(HearthError, match="is not JSON"):
        read_questions(bad)
    with pytest.raises(HearthError, match="cannot be read"):
        read_questions(tmp_path / "missing.jsonl")


def test_follow_ups_are_measured_against_the_first_question_of_the_conversation() -> None:
    samples = [
        SAMPLE,
        replace(SAMPLE, time_to_first_token_ms=2025.0, prompt_tokens=1000, cached_tokens=900),
        replace(SAMPLE, time_to_first_token_ms=4050.0, prompt_tokens=1200, cached_tokens=1080),
    ]
    figures = follow_up_figures(samples)
    assert figures["time_to_first_token_vs_first"]["low"] == pytest.approx(0.25)
    assert figures["time_to_first_token_vs_first"]["high"] == pytest.approx(0.5)
    assert figures["cached_share"]["median"] == pytest.approx(0.9)
    assert follow_up_lines(figures)[1].strip().startswith("first token vs the first question   0.38 (min–max 0.25–0.50")
