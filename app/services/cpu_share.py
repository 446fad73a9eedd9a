"""Sharing the CPU between the chat model and indexing files.

llama.cpp splits each step across its threads and waits for the slowest: with one thread per core, a core taken by
anything else (the embedder, a PDF being read) stalls every step, and answers crawl 10-30x slower. Pausing indexing
while an answer is written keeps the answer fast but stops indexing whenever someone chats. So while files are
indexed the engine computes with fewer threads, leaving the embedder cores of its own; between two batches the
embedder takes every core while no answer is written, and only its share while one is (:func:`cpu_shares`, pure).
:class:`CpuSharing` applies it: engine threads through the runtime, embedder threads through torch."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CpuShares:
    engine: int | None  # threads the chat model computes with; None: its plan's
    embedder: int  # threads the embedder computes with


def cpu_shares(cores: int, engine_threads: int, indexing: bool, answering: bool) -> CpuShares:
    """Who computes with how many threads. Quiet, or only chatting: the engine as planned, the embedder every core.
    While indexing: the embedder keeps a quarter of the cores (at least one) and the engine the rest (at least one);
    between batches with no answer being written the embedder takes every core again."""
    cores = max(cores, 1)
    if not indexing:
        return CpuShares(None, cores)
    reserved = max(1, cores // 4)
    engine = max(1, min(engine_threads, cores - reserved))
    return CpuShares(engine, max(1, cores - engine) if answering else cores)


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
        set_embedder_threads: Callable[[int], None] | None = None,
    ) -> None:
        self._engine = engine
        self._engine_threads = engine_threads
        self._answering = answering
        self._cores = cores
        self._set_embedder_threads = set_embedder_threads or set_torch_threads
        self._lock = threading.Lock()
        self._runs = 0
        self._applied: CpuShares | None = None

    @contextlib.contextmanager
    def indexing(self) -> Iterator[None]:
        with self._lock:
            self._runs += 1
        try:
            self.before_batch()
            yield
        finally:
            with self._lock:
                self._runs -= 1
            self.before_batch()

    def before_batch(self) -> None:
        """Apply the shares for what runs now (an indexing run calls it between batches)."""
        with self._lock:
            shares = cpu_shares(self._cores, self._engine_threads(), self._runs > 0, self._answering())
            if shares == self._applied:
                return
            engine_changed = self._applied is None or shares.engine != self._applied.engine
            embedder_changed = self._applied is None or shares.embedder != self._applied.embedder
            self._applied = shares
        log.debug("threads: engine %s, embedder %d", shares.engine or "as planned", shares.embedder)
        if engine_changed:
            self._engine.set_threads(shares.engine)
        if embedder_changed:
            self._set_embedder_threads(shares.embedder)


def set_torch_threads(threads: int) -> None:
    """The embedder's threads (sentence-transformers computes with torch's intra-op pool)."""
    import torch

    torch.set_num_threads(threads)
