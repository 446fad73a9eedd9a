"""Sharing the CPU between the chat model and indexing: the shares for what runs (pure), and the sharing object that
applies them only when they change and gives the engine its planned threads back when the last run ends."""

from __future__ import annotations

import pytest

from app.services.library.cpu_share import MAX_REST_S, REST_WHILE_ANSWERING, CpuShares, CpuSharing, cpu_shares


@pytest.mark.parametrize(
    ("cores", "planned", "indexing", "answering", "shares"),
    [
        (2, 2, False, False, CpuShares(None, 2)),  # quiet: as planned
        (2, 2, False, True, CpuShares(None, 2)),  # chatting only
        (2, 2, True, False, CpuShares(1, 2)),  # indexing, nobody chatting: the embedder takes every core
        (2, 2, True, True, CpuShares(1, 1, REST_WHILE_ANSWERING)),  # both: a core each, and the embedder rests
        (8, 8, True, True, CpuShares(6, 2, REST_WHILE_ANSWERING)),  # a quarter of the cores for the embedder
        (8, 4, True, True, CpuShares(4, 4, REST_WHILE_ANSWERING)),  # an engine planned with fewer keeps its count
        (1, 1, True, True, CpuShares(1, 1, REST_WHILE_ANSWERING)),  # one core: nobody goes without
    ],
)
def test_shares_for_what_runs(cores: int, planned: int, indexing: bool, answering: bool, shares: CpuShares) -> None:
    assert cpu_shares(cores, planned, indexing, answering) == shares


class Recorder:
    def __init__(self) -> None:
        self.engine: list[int | None] = []
        self.embedder: list[int] = []

    def set_threads(self, threads: int | None) -> None:
        self.engine.append(threads)


def test_the_shares_change_as_answers_come_and_go_and_the_plan_returns_after_the_last_run() -> None:
    seen = Recorder()
    answering = [False]
    sharing = CpuSharing(seen, lambda: 2, lambda: answering[0], 2, seen.embedder.append, sleep=lambda _: None)
    with sharing.indexing():
        sharing.before_batch()
        sharing.before_batch()  # nothing changed: nothing sent again
        answering[0] = True
        sharing.before_batch()
        with sharing.indexing():  # a second run at once
            sharing.before_batch()
        assert seen.engine == [1] and seen.embedder == [2, 1]  # the second run's end did not end the sharing
        answering[0] = False
        sharing.before_batch()
    assert seen.engine == [1, None] and seen.embedder == [2, 1, 2]


def test_while_an_answer_is_written_the_embedder_rests_a_share_of_each_batchs_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import app.services.library.cpu_share as cpu_share

    clock = [100.0]
    monkeypatch.setattr(cpu_share.time, "monotonic", lambda: clock[0])
    rests: list[float] = []
    answering = [False]
    sharing = CpuSharing(Recorder(), lambda: 2, lambda: answering[0], 2, lambda _: None, sleep=rests.append)
    with sharing.indexing():
        clock[0] += 30.0  # reading the file: not a batch
        sharing.before_batch()  # the first batch: nothing to measure yet
        clock[0] += 1.0
        sharing.before_batch()  # no answer: no rest
        answering[0] = True
        clock[0] += 0.8
        sharing.before_batch()
        clock[0] += 20.0  # the next file read in between: the rest is capped
        sharing.before_batch()
    assert rests == [pytest.approx(0.8 * REST_WHILE_ANSWERING), MAX_REST_S]
