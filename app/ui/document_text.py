"""Pure functions that turn ingestion results and file records into what the Documents tab shows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.ingest_text import progress_words
from models.shared.wording import format_eta, plural
from rag.ingest import FileOutcome, IngestProgress
from rag.manifest import FileRecord

TABLE_HEADERS = ["File", "Status", "Passages", "Where"]  # one word, "passages", as the answers' sources say


def progress_line(progress: IngestProgress) -> str:
    """The line shown while files are indexed, such as "Indexing 2 of 5: **manual.pdf** · reading page 40 of 196 ·
    14 pages/s · about 11 s to go · all files: 2 min left"."""
    if not progress.current:
        return f"Indexed {progress.files_done} of {plural(progress.files_total, 'file')}."
    head = f"Indexing {progress.position} of {progress.files_total}: **{escape_name(progress.current)}**"
    return " · ".join([head, *progress_words(progress)])


def cancelling_line(progress: IngestProgress | None) -> str:
    """Shown from the moment Cancel is pressed until the ingestion has stopped."""
    where = f" (stopping at **{escape_name(progress.current)}**)" if progress and progress.current else ""
    return f"Cancelling…{where} What was indexed so far is kept."


def upload_report(outcomes: Sequence[FileOutcome], total: int, cancelled: bool) -> str:
    """What an upload did, file by file. The counts add up: every file is indexed, unchanged, skipped (with its
    reason), stopped by Cancel part-way, or not reached before Cancel."""
    indexed = [o for o in outcomes if o.outcome == "indexed"]
    unchanged = [o for o in outcomes if o.outcome == "unchanged"]
    skipped = [o for o in outcomes if o.outcome == "skipped" and not o.cancelled]
    stopped = [o for o in outcomes if o.cancelled]
    parts = []
    if indexed:
        chunks = sum(o.chunks for o in indexed)
        parts.append(f"Added {plural(len(indexed), 'file')} ({plural(chunks, 'passage')}).")
    if unchanged:
        names = ", ".join(escape_name(Path(o.path).name) for o in unchanged)
        parts.append(f"Already in this collection, unchanged: {names}.")
    lines = [" ".join(parts)] if parts else []
    lines += [f"- Skipped **{escape_name(Path(o.path).name)}**: {o.reason}" for o in skipped]
    if cancelled:
        done = len(indexed) + len(unchanged) + len(skipped)
        names = ", ".join(f"**{escape_name(Path(o.path).name)}**" for o in stopped)
        during = f" ({names} stopped part-way, not added)" if stopped else ""
        rest = total - done
        again = f"; add the other {plural(rest, 'file')} again to finish" if rest > 0 else ""
        lines.append(f"Cancelled after {done} of {plural(total, 'file')}{during}. What was indexed is kept{again}.")
    return "\n".join(lines) or "Nothing to add."


def escape_name(name: str) -> str:
    return "".join(f"\\{ch}" if ch in "\\`*_[]<>#|" else ch for ch in name)


def file_status(record: FileRecord) -> str:
    return "indexed" if record.status == "indexed" else f"skipped: {record.reason}"


def file_rows(records: Sequence[FileRecord], owned: Path | None) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for record in records:
        path = Path(record.path)
        where = "uploaded" if owned is not None and path.is_relative_to(owned) else str(path.parent)
        rows.append([path.name, file_status(record), record.chunks, where])
    return rows


def collection_summary(collection: str | None, records: Sequence[FileRecord], server: str | None = None) -> str:
    """The line under the file table; ``server``: the Chroma server the collection lives on (None: this computer)."""
    if collection is None:
        return "No collections yet. Create one, then add files to it."
    indexed = [r for r in records if r.status == "indexed"]
    skipped = len(records) - len(indexed)
    line = f"**{collection}**: {plural(len(indexed), 'file')}, {plural(sum(r.chunks for r in indexed), 'passage')}"
    where = f", on the Chroma server `{server}`" if server else ""  # as code: not a link to open
    return line + (f", {skipped} skipped" if skipped else "") + where + "."


def read_ahead_line(done: int, total: int, eta_s: float | None) -> str:
    """Progress of reading new passages ahead, under the upload's report."""
    if done >= total:
        return f"Read {plural(total, 'passage')} ahead: questions that find them start answering sooner."
    return (
        f"Reading the new passages ahead, so questions start answering sooner: {done} of {total} · {format_eta(eta_s)}"
    )
