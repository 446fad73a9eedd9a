"""The pipeline benchmark's arithmetic: TCP counters read from `ss`, percentiles, and the summary's rows and ratios."""

from __future__ import annotations

import pytest

from app.bench.meters import tcp_bytes
from app.bench.pipeline import RAW, SINGLE, SPLIT, Answer, Report, Round, summarise

SS = (
    "0      0      127.0.0.1:50052 127.0.0.1:39680\n"
    "\t bbr wscale:10,10 rto:204 bytes_sent:1000 bytes_acked:1001 bytes_received:250 segs_out:3\n"
    "0      0      127.0.0.1:39680 127.0.0.1:50052\n"
    "\t bbr bytes_sent:250 bytes_received:1000\n"
    "0      0      127.0.0.1:50053 127.0.0.1:40000\n"
    "\t bbr bytes_sent:7 bytes_received:3\n"
)


def test_only_the_workers_own_connections_are_counted() -> None:
    assert tcp_bytes(SS, {"50052"}) == 1250  # the worker's side, not the client's mirror of the same bytes
    assert tcp_bytes(SS, {"50052", "50053"}) == 1260
    assert tcp_bytes(SS, set()) == 0 and tcp_bytes("", {"50052"}) == 0


def _round(plan: str, users: int, tokens: int, wall: float, between: float, moved: int = 0) -> Round:
    answers = tuple(Answer(0.05, tokens // users, between) for _ in range(users))
    return Round(plan, users, tokens, wall, answers, moved)


def test_rows_ratios_and_bytes_per_token() -> None:
    report = Report("m", ["127.0.0.1:1", "127.0.0.1:2"], 2, 64)
    report.rounds = [
        _round(SINGLE, 1, 64, 1.0, 0.010),
        _round(SPLIT, 1, 64, 2.0, 0.020, moved=64_000),
        _round(RAW, 1, 64, 2.5, 0.025, moved=64_000),
        _round(SINGLE, 1, 64, 1.0, 0.010),
        _round(SPLIT, 1, 64, 1.6, 0.020, moved=64_000),
        _round(RAW, 1, 64, 2.0, 0.025, moved=64_000),
    ]
    summary = summarise(report, [1])
    rows = {row["plan"]: row for row in summary["rows"]}
    assert rows[SINGLE]["aggregate_tokens_per_s"] == 64.0
    assert rows[SPLIT]["bytes_per_token"] == 1000 and rows[SINGLE]["bytes_per_token"] == 0
    assert rows[SPLIT]["ms_per_token_p50"] == 20.0
    assert rows[SPLIT]["joules_per_token"] is None  # no energy counter: not a zero
    ratio = summary["split_vs_one_process"]
    assert ratio["runs"] == 2 and ratio["low"] == 0.5 and ratio["high"] == 0.625
    assert summary["split_vs_llama_cpp_rpc"]["median"] == (1.25 + 1.25) / 2


def test_each_stages_busy_share_and_how_many_computed_at_once() -> None:
    import dataclasses

    report = Report("m", ["127.0.0.1:1"], 2, 64, stages={SPLIT: ["this machine", "127.0.0.1:1"]})
    # one stage after the other: the engine busy 0.2 s and the worker 0.7 s of a 1 s round, then 0.4 s of a 2 s one
    report.rounds = [
        dataclasses.replace(_round(SPLIT, 1, 64, 1.0, 0.02), stage_busy_s=(0.2, 0.7)),
        dataclasses.replace(_round(SPLIT, 1, 64, 2.0, 0.02), stage_busy_s=(0.4, 1.4)),
        _round(SINGLE, 1, 64, 1.0, 0.01),  # no stages measured: no share
        _round(SINGLE, 1, 64, 1.0, 0.01),
    ]
    rows = {row["plan"]: row for row in summarise(report, [1])["rows"]}
    assert rows[SPLIT]["stage_busy"] == {"this machine": 0.2, "127.0.0.1:1": 0.7}
    assert rows[SPLIT]["stages_at_once"] == pytest.approx(0.9)
    assert "stage_busy" not in rows[SINGLE]
