"""How far an ingestion has got, for the page and the terminal: which file of how many, what is being done to it
(pages read, passages embedded) with its rate and time left, and an estimate for the whole run. Pure values and the
counter that makes them; :mod:`rag.ingest` reports them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

Phase = Literal["reading", "splitting", "embedding"]


@dataclass(frozen=True)
class StepProgress:
    """What is being done to the current file: pages read, or passages embedded (``files`` of them together)."""

    phase: Phase
    done: int = 0
    total: int | None = None  # None while unknown (a loader that does not count pages)
    elapsed_s: float = 0.0
    per_s: float = 0.0  # 0 until something is done
    eta_s: float | None = None  # time left in this step; None until a rate and the total are known
    files: int = 1


@dataclass(frozen=True)
class IngestProgress:
    files_done: int  # files with an outcome so far (indexed, unchanged or skipped)
    files_total: int
    current: str  # the name of the file being worked on; "" once the run has finished
    chunks_done: int
    # the whole run, from the bytes of the files done so far and the share of the passages being embedded now;
    # None until the first passages are
    eta_s: float | None
    position: int = 0  # 1-based place of the current file in the run (it never skips a number)
    step: StepProgress | None = None


@dataclass
class Meter:
    """Counts for progress reports. The run's ETA comes from the bytes of the files finished so far (read and
    embedded, or found unchanged or unreadable) and, while files are embedded, the share of their bytes whose
    passages are: so the first estimate comes with the first passages, not once the first file is done. A step's
    ETA comes from its own rate."""

    total_files: int
    total_bytes: int
    files_done: int = 0
    bytes_done: int = 0
    chunks_done: int = 0
    position: int = 0
    current: str = ""
    embedding_bytes: int = 0  # the bytes of the files whose passages are being embedded now
    started: float = field(default_factory=time.perf_counter)
    step_started: float = field(default_factory=time.perf_counter)

    def next_file(self, name: str) -> None:
        self.position += 1
        self.current = name

    def begin_step(self) -> None:
        self.step_started = time.perf_counter()

    def step(self, phase: Phase, done: int = 0, total: int | None = None, files: int = 1) -> StepProgress:
        return step_progress(phase, done, total, time.perf_counter() - self.step_started, files)

    def progress(self, step: StepProgress | None = None) -> IngestProgress:
        eta = run_eta(
            self.total_bytes, self.bytes_done + self.embedding_share(step), time.perf_counter() - self.started
        )
        return IngestProgress(
            self.files_done, self.total_files, self.current, self.chunks_done, eta, self.position, step
        )

    def embedding_share(self, step: StepProgress | None) -> float:
        """The bytes of the files being embedded, in the share of their passages embedded so far."""
        if step is None or step.phase != "embedding" or not step.total or not self.embedding_bytes:
            return 0.0
        return self.embedding_bytes * min(step.done, step.total) / step.total

    def finished(self) -> IngestProgress:
        return IngestProgress(self.files_done, self.total_files, "", self.chunks_done, 0.0, self.position)


def run_eta(total_bytes: int, done_bytes: float, elapsed_s: float) -> float | None:
    """The whole run's time left at the rate its bytes have gone so far; None before any."""
    if elapsed_s <= 0 or done_bytes <= 0:
        return None
    return max(total_bytes - done_bytes, 0.0) * elapsed_s / done_bytes


def step_progress(phase: Phase, done: int, total: int | None, elapsed_s: float, files: int = 1) -> StepProgress:
    """A step's rate and time left, from how much of it is done after ``elapsed_s``."""
    per_s = done / elapsed_s if done > 0 and elapsed_s > 0 else 0.0
    eta = max(total - done, 0) / per_s if per_s > 0 and total is not None else None
    return StepProgress(phase, done, total, elapsed_s, per_s, eta, files)
