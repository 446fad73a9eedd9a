"""The spread of repeated benchmark runs: paired ratios, median, min–max, IQR, and when to warn of noise."""

from __future__ import annotations

import pytest

from app.bench.chat import Sample, summarise
from app.bench.stats import format_spread, noise_warning, paired_ratios, spread, spread_lines


def test_each_round_is_divided_by_the_raw_value_of_the_same_round() -> None:
    assert paired_ratios([10.0, 30.0, 5.0], [20.0, 30.0, 0.0]) == [0.5, 1.0]  # no raw value: no ratio
    with pytest.raises(ValueError):
        paired_ratios([1.0], [1.0, 2.0])  # rounds must pair up


@pytest.mark.parametrize(
    ("values", "median", "low", "high", "q1", "q3"),
    [
        ([0.9], 0.9, 0.9, 0.9, 0.9, 0.9),
        ([1.0, 3.0], 2.0, 1.0, 3.0, 1.5, 2.5),
        ([0.57, 3.76, 1.0, 1.1, 0.95], 1.0, 0.57, 3.76, 0.95, 1.1),
    ],
)
def test_spread(values: list[float], median: float, low: float, high: float, q1: float, q3: float) -> None:
    value = spread(values)
    assert (value.median, value.low, value.high, value.runs) == (median, low, high, len(values))
    assert (value.q1, value.q3) == pytest.approx((q1, q3))


def test_wide_runs_are_called_noisy_and_steady_ones_are_not() -> None:
    wild = spread([0.57, 3.76, 1.0])  # the two runs, and one between
    assert wild.noisy
    warning = noise_warning(wild, "the decode ratio")
    assert warning is not None and "the decode ratio varies by 319%" in warning and "--runs" in warning
    steady = spread([0.97, 1.0, 1.02, 0.99])
    assert not steady.noisy and noise_warning(steady, "x") is None
    assert not spread([5.0]).noisy  # one run has no spread to judge


def test_the_printed_spread_names_its_parts() -> None:
    assert format_spread(spread([0.9, 1.0, 1.1])) == "1.00 (min–max 0.90–1.10, IQR 0.95–1.05, 3 runs)"
    assert "one run" in format_spread(spread([1.0]))
    with pytest.raises(ValueError):
        spread([])


def test_spread_lines_align_labels_say_what_was_not_measured_and_warn_after_the_table() -> None:
    wild, steady = spread([0.57, 3.76, 1.0]).as_dict(), spread([0.97, 1.0, 1.02]).as_dict()
    lines = spread_lines([("decode", steady), ("first token", wild), ("prefill", None)], 14, "not measured")
    assert lines[0] == "  decode        1.00 (min–max 0.97–1.02, IQR 0.98–1.01, 3 runs)"
    assert lines[1].startswith("  first token   1.00 (min–max 0.57–3.76")
    assert lines[2] == "  prefill       not measured"
    assert len(lines) == 4 and lines[3].startswith("warning: the first token ratio varies by 319%")


def test_the_chat_bench_summary_reports_the_median_of_paired_ratios_and_their_spread() -> None:
    samples = []
    for raw_rate, hearth_rate in ((10.0, 9.0), (20.0, 10.0), (10.0, 10.0)):
        samples += [Sample("raw", 100.0, 16, raw_rate), Sample("hearth", 110.0, 16, hearth_rate)]
    report = summarise(samples, "m", "llama.cpp (CPU)", 16)
    decode = report["decode_tokens_per_s"]
    assert isinstance(decode, dict)
    assert decode["raw"] == 10.0 and decode["hearth"] == 10.0
    assert decode["ratio"] == 0.9  # the median of 0.9, 0.5 and 1.0, not 10 / 10
    spreads = report["ratio_spread"]
    assert isinstance(spreads, dict)
    assert (spreads["decode_tokens_per_s"]["low"], spreads["decode_tokens_per_s"]["high"]) == (0.5, 1.0)
    assert spreads["time_to_first_token_ms"]["median"] == pytest.approx(1.1)
