"""Sharing the CPU between the chat model and indexing files.

llama.cpp splits each step across its threads and waits for the slowest: with one thread per core, a core taken by
anything else (the embedder, a PDF being read) stalls every step, and answers crawl 10-30x slower. Pausing indexing
while an answer is written keeps the answer fast but stops indexing whenever someone chats. So while files are
indexed the engine computes with fewer threads, leaving the embedder cores of its own; between two batches the
embedder takes every core while no answer is written, and only its share while one is (:func:`cpu_shares`, pure).
Cores are not all they share: a token's step reads the model's weights from memory, and so does the embedder, so
while an answer is written the embedder also rests a while after each batch. :class:`CpuSharing` applies it:
engine threads through the runtime, embedder threads through the embedder (torch's pool, or OpenVINO's compiled
model), rests between batches."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)


# While an answer is written the embedder rests this share of each batch's time after it (it then embeds two
# thirds of the time): measured with `hearth bench contention`, see docs/speed.md.
REST_WHILE_ANSWERING = 0.5
MAX_REST_S = 2.0  # the time between two batches may include reading the next file: never rest longer than this


@dataclass(frozen=True)
class CpuShares:
    engine: int | None  # threads the chat model computes with; None: its plan's
    embedder: int  # threads the embedder computes with
    rest: float = 0.0  # after each batch the embedder rests this share of the batch's time


def cpu_shares(cores: int, engine_threads: int, indexing: bool, answering: bool) -> CpuShares:
    """Who computes with how many threads. Quiet, or only chatting: the engine as planned, the embedder every core.
    While indexing: the embedder keeps a quarter of the cores (at least one) and the engine the rest (at least one);
    between batches with no answer being written the embedder takes every core again."""
    cores = max(cores, 1)
    if not indexing:
        return CpuShares(None, cores)
    reserved = max(1, cores // 4)
    engine = max(1, min(engine_threads, cores - reserved))
    if not answering:
        return CpuShares(engine, cores)
    return CpuShares(engine, max(1, cores - engine), REST_WHILE_ANSWERING)


class Threads(Protocol):
    def set_threads(self, threads: int | None) -> None: ...


class CpuSharing:
    """Applies :func:`cpu_shares` for the indexing runs of one process: ``indexing()`` around a run, ``before_batch``
    between its batches. Several runs at once count as one."""

    def __init__(
        self,
        engine: Threads,
        engine_threads: Callable[[], int],
        answering: Callable[[], bool],
        cores: int,
        set_embedder_threads: Callable[[int], None],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._engine = engine
        self._engine_threads = engine_threads
        self._answering = answering
        self._cores = cores
        self._set_embedder_threads = set_embedder_threads
        self._sleep = sleep
        self._lock = threading.Lock()
        self._runs = 0
        self._applied: CpuShares | None = None
        self._last_batch: float | None = None  # when the last batch began (monotonic), while a run goes on

    @contextlib.contextmanager
    def indexing(self) -> Iterator[None]:
        with self._lock:
            self._runs += 1
        try:
            self._apply()
            yield
        finally:
            with self._lock:
                self._runs -= 1
                self._last_batch = None
            self._apply()

    def before_batch(self) -> None:
        """Apply the shares for what runs now (an indexing run calls it between batches); while an answer is being
        written, rest first for a share of the last batch's time."""
        shares = self._apply()
        now = time.monotonic()
        with self._lock:
            last = self._last_batch
        if shares.rest and last is not None:
            self._sleep(min(shares.rest * (now - last), MAX_REST_S))
        with self._lock:
            self._last_batch = time.monotonic() if self._runs else None

    def _apply(self) -> CpuShares:
        with self._lock:
            shares = cpu_shares(self._cores, self._engine_threads(), self._runs > 0, self._answering())
            before, self._applied = self._applied, shares
        if shares == before:
            return shares
        log.debug("threads: engine %s, embedder %d", shares.engine or "as planned", shares.embedder)
        if before is None or shares.engine != before.engine:
            self._engine.set_threads(shares.engine)
        if before is None or shares.embedder != before.embedder:
            self._set_embedder_threads(shares.embedder)
        return shares
