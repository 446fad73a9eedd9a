"""Embedding jobs (app.api.embedding_jobs): slices, cancel between them, a cap on jobs at once, a close that
waits. A fake embedder stands in for MiniLM: this is the bookkeeping only."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from app.api.embedding_jobs import EmbeddingCancelled, EmbeddingJobs
from backends.base import CancelToken
from models.shared.errors import Busy


def counting_embedder(calls: list[int], after: CancelToken | None = None, cancel_at: int = -1):  # type: ignore[no-untyped-def]
    def embed(texts: Sequence[str]) -> np.ndarray:
        calls.append(len(texts))
        if after is not None and len(calls) == cancel_at:
            after.cancel()
        return np.ones((len(texts), 3), dtype=np.float32)

    return embed


def test_texts_are_embedded_a_slice_at_a_time_in_order() -> None:
    jobs = EmbeddingJobs(slice_texts=4)
    calls: list[int] = []
    vectors = jobs.embed(counting_embedder(calls), [f"t{i}" for i in range(10)], CancelToken())
    assert calls == [4, 4, 2] and vectors.shape == (10, 3)


def test_a_cancelled_job_stops_at_the_next_slice() -> None:
    jobs = EmbeddingJobs(slice_texts=4)
    calls: list[int] = []
    cancel = CancelToken()
    with pytest.raises(EmbeddingCancelled) as stopped:
        jobs.embed(counting_embedder(calls, cancel, cancel_at=2), [f"t{i}" for i in range(40)], cancel)
    assert calls == [4, 4] and "8 of 40" in stopped.value.message


def test_jobs_past_the_cap_are_told_to_come_back() -> None:
    jobs = EmbeddingJobs(max_in_flight=2)
    with jobs.admitted(), jobs.admitted():
        assert jobs.in_flight == 2
        with pytest.raises(Busy) as busy, jobs.admitted():
            pass
        assert busy.value.retry_after_s > 0
    assert jobs.in_flight == 0
    with jobs.admitted():
        assert jobs.in_flight == 1


def test_close_cancels_every_job_waits_for_it_and_refuses_new_ones() -> None:
    jobs = EmbeddingJobs(slice_texts=1)
    started, finished = threading.Event(), threading.Event()
    outcome: list[str] = []

    def slow(texts: Sequence[str]) -> np.ndarray:
        started.set()
        finished.wait(0.05)
        return np.ones((len(texts), 3), dtype=np.float32)

    def run() -> None:
        with jobs.admitted() as cancel:
            try:
                jobs.embed(slow, ["t"] * 10_000, cancel)
            except EmbeddingCancelled:
                outcome.append("cancelled")

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(10)
    assert jobs.close(wait_s=10)
    worker.join(10)
    assert outcome == ["cancelled"] and jobs.in_flight == 0
    with pytest.raises(EmbeddingCancelled), jobs.admitted():
        pass
