"""The pipeline benchmark's arithmetic: TCP counters read from `ss`, percentiles, and the summary's rows and ratios;
and a round's users starting together, or ending together when one cannot start."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from app.bench import pipeline
from app.bench.meters import tcp_bytes
from app.bench.pipeline import RAW, SINGLE, SPLIT, Answer, Report, Round, summarise
from backends.base import GenerationParams, TextDelta
from models.shared.errors import Busy

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


class _OneRefused:
    """A runtime that lends the model to every user but one, as a full waiting line or a restarting engine would."""

    def __init__(self, refused: int) -> None:
        self._refused, self._asked, self._lock = refused, 0, threading.Lock()

    @contextmanager
    def lease(self) -> Iterator[Any]:
        with self._lock:
            self._asked += 1
            turn = self._asked
        if turn == self._refused:
            raise Busy("Hearth is answering 8 requests already.", "Try again in a few seconds.")
        yield self

    def stream_chat(self, *_: object) -> Iterator[TextDelta]:
        yield TextDelta("one")
        yield TextDelta(" two")


def test_a_user_who_cannot_start_ends_the_round_with_its_error_instead_of_leaving_the_others_waiting() -> None:
    """The round's users hold the model, then start together: one refused before the start used to leave the
    others (and the benchmark) waiting at the start for ever."""
    outcome: list[BaseException | Round] = []

    def run() -> None:
        try:
            outcome.append(pipeline._hearth_round(pipeline.SINGLE, _OneRefused(3), 4, GenerationParams(), ()))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the round never ended"
    assert isinstance(outcome[0], Busy) and "8 requests" in str(outcome[0])
    everyone = pipeline._hearth_round(pipeline.SINGLE, _OneRefused(0), 4, GenerationParams(), ())
    assert [a.tokens for a in everyone.answers] == [2, 2, 2, 2]
