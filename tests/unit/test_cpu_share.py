"""Sharing the CPU between the chat model and indexing: the shares for what runs (pure), and the sharing object that
applies them only when they change and gives the engine its planned threads back when the last run ends."""

from __future__ import annotations

import pytest

from app.services.cpu_share import CpuShares, CpuSharing, cpu_shares


@pytest.mark.parametrize(
    ("cores", "planned", "indexing", "answering", "shares"),
    [
        (2, 2, False, False, CpuShares(None, 2)),  # quiet: as planned
        (2, 2, False, True, CpuShares(None, 2)),  # chatting only
        (2, 2, True, False, CpuShares(1, 2)),  # indexing, nobody chatting: the embedder takes every core
        (2, 2, True, True, CpuShares(1, 1)),  # both: a core each
        (8, 8, True, True, CpuShares(6, 2)),  # a quarter of the cores for the embedder
        (8, 4, True, True, CpuShares(4, 4)),  # an engine planned with fewer keeps its count
        (1, 1, True, True, CpuShares(1, 1)),  # one core: nobody goes without
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
    sharing = CpuSharing(seen, lambda: 2, lambda: answering[0], 2, seen.embedder.append)
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
