"""`hearth bench lookup`'s summary: per kind of question, the speeds each way, the per-question ratio, the share of
guesses kept over all guesses, and how many texts were the same."""

from __future__ import annotations

import pytest

from app.bench.lookup import LookupSample, report_lines, summarise


def _sample(
    kind: str, plain: float, looked: float, drafted: int = 10, accepted: int = 5, same: bool = True
) -> LookupSample:
    return LookupSample("q", kind, plain, looked, drafted, accepted, same)


def test_each_kind_is_summarised_apart_and_guesses_kept_count_over_all_guesses() -> None:
    samples = [
        _sample("documents", 10.0, 15.0, 20, 15),
        _sample("documents", 10.0, 12.0, 10, 2, same=False),
        _sample("documents", 12.0, 18.0, 0, 0),
        _sample("open", 10.0, 9.5, 4, 0),
    ]
    summary = summarise(samples)
    documents, open_ = summary["documents"], summary["open"]
    assert documents["ratio"]["median"] == pytest.approx(1.5) and documents["ratio"]["low"] == pytest.approx(1.2)
    assert documents["accepted_share"] == pytest.approx(17 / 30)  # not the mean of per-question shares
    assert documents["same_text"] == 2 and documents["questions"] == 3
    assert open_["ratio"]["median"] == pytest.approx(0.95) and open_["accepted_share"] == 0.0
    lines = report_lines(summary, "Model")
    assert "answers from documents (3):" in lines and "  same text both ways             2 of 3" in lines
    assert any(line.startswith("  guesses kept                    57%") for line in lines)


def test_a_question_that_wrote_one_token_has_no_speed_and_is_left_out() -> None:
    summary = summarise([_sample("documents", 0.0, 0.0), _sample("documents", 10.0, 13.0)])
    assert summary["documents"]["questions"] == 1 and "open" not in summary
    assert _sample("open", 0.0, 5.0).ratio == 0.0
