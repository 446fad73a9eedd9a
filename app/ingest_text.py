"""Words for an ingestion's progress, shared by the Documents tab and `hearth ingest` (pure functions)."""

from __future__ import annotations

from models.shared.wording import format_eta
from rag.ingest_progress import IngestProgress, StepProgress


def step_words(step: StepProgress) -> str:
    """What is happening to the current file, its rate and the time left for it: "reading page 40 of 196 · 14
    pages/s · about 11 s to go"."""
    if step.phase == "splitting":
        return "splitting into passages"
    if step.phase == "reading":
        if not step.total:  # a loader that does not count pages (or not yet)
            return f"reading ({step.elapsed_s:.0f} s)"
        what, unit = f"reading page {step.done:,} of {step.total:,}", "pages"
    else:
        what, unit = f"embedding {step.done:,} of {step.total or 0:,} passages", "passages"
        if step.files > 1:
            what += f" from {step.files} files"
    if step.per_s <= 0:
        return what
    rate = f"{step.per_s:.1f}" if step.per_s < 10 else f"{step.per_s:.0f}"
    words = f"{what} · {rate} {unit}/s"
    if step.eta_s is not None:
        words += f" · about {duration_words(step.eta_s)} to go"
    return words


def duration_words(seconds: float) -> str:
    if seconds < 60:
        return f"{max(seconds, 1):.0f} s"
    return f"{max(round(seconds / 60), 1)} min"


def progress_words(progress: IngestProgress) -> list[str]:
    """The parts of a progress line after the file's name: its step, and the whole run's time left while other
    files are still to come."""
    parts = [step_words(progress.step)] if progress.step is not None else []
    if progress.position < progress.files_total:
        parts.append(f"all files: {format_eta(progress.eta_s)}")
    return parts
