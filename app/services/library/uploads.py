"""Files added through the web page: the browser's upload lands in Gradio's temporary folder, which is cleaned up,
so Hearth keeps its own copy in the data directory (a folder per collection) and indexes that.

Uploading a file again with the same name and content changes nothing; the same name with new content replaces
the copy (a new version, re-indexed) — unless the new version cannot be indexed (empty, damaged, …): then the
previous version is put back and stays searchable, and the report says why the new one was refused. Copies are
written under a temporary name and renamed, so a crash never leaves half a file under a real name.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from backends.base import CancelToken
from models.gguf import sha256_of
from rag.manifest import FileRecord

if TYPE_CHECKING:
    from app.services.library.documents import DocumentServices
    from rag.ingest import IngestEvent

PARTIAL_SUFFIX = ".partial"
PREVIOUS_SUFFIX = ".previous"
MAX_NAME_CHARS = 200


def safe_file_name(name: str) -> str:
    """A browser-supplied name reduced to a plain, visible file name (no folders, no leading dots)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip().lstrip(".").strip()
    if not base:
        return "upload"
    stem, dot, suffix = base.rpartition(".")
    if len(base) > MAX_NAME_CHARS:
        keep = MAX_NAME_CHARS - len(suffix) - 1
        base = f"{stem[:keep]}.{suffix}" if dot and keep > 0 else base[:MAX_NAME_CHARS]
    return base


def unique_names(names: Iterable[str]) -> list[str]:
    """Names for one batch of uploads, numbered where two files share a name ("notes (2).md")."""
    used: set[str] = set()
    result: list[str] = []
    for name in names:
        candidate, number = name, 2
        stem, dot, suffix = name.rpartition(".")
        while candidate.casefold() in used:
            candidate = f"{stem} ({number}).{suffix}" if dot and stem else f"{name} ({number})"
            number += 1
        used.add(candidate.casefold())
        result.append(candidate)
    return result


@dataclass(frozen=True)
class KeptUpload:
    path: Path
    previous: Path | None  # the version this upload replaced, kept until the new one is indexed


def keep_uploads(uploaded: Sequence[Path], folder: Path) -> list[KeptUpload]:
    """Copy ``uploaded`` into ``folder`` and return the copies, in the same order."""
    folder.mkdir(parents=True, exist_ok=True)
    kept: list[KeptUpload] = []
    for source, name in zip(uploaded, unique_names(safe_file_name(p.name) for p in uploaded), strict=True):
        target = folder / name
        previous = None
        if not _same_content(source, target):
            partial = folder / f".{name}{PARTIAL_SUFFIX}"
            shutil.copyfile(source, partial)
            if target.exists():
                previous = folder / f".{name}{PREVIOUS_SUFFIX}"
                target.replace(previous)
            partial.replace(target)
        kept.append(KeptUpload(target, previous))
    return kept


def add_uploads(
    documents: DocumentServices,
    collection: str,
    uploaded: Sequence[Path],
    cancel: CancelToken,
    before_batch: Callable[[], object] | None = None,
    flush_chunks: int | None = None,
) -> Iterator[IngestEvent]:
    """Keep copies of ``uploaded`` and index them into ``collection``: the ingestor's events, one outcome per file.

    A copy that could not be indexed is deleted (its reason stays in the collection's file list), and if it
    replaced an earlier version, that version is restored and indexed again, so nothing searchable is lost."""
    from rag.ingest import FLUSH_CHUNKS, FileOutcome

    info = documents.ingestor.open_collection(collection)
    folder = documents.uploads_folder(info)
    kept = {str(k.path): k for k in keep_uploads(uploaded, folder)}
    restore: list[KeptUpload] = []
    done: set[str] = set()
    events = documents.ingestor.ingest(
        [Path(p) for p in kept], info.name, cancel, before_batch, flush_chunks or FLUSH_CHUNKS
    )
    for event in events:
        upload = kept.get(event.path) if isinstance(event, FileOutcome) else None
        if upload is not None and isinstance(event, FileOutcome):
            done.add(event.path)
            if event.outcome == "skipped" and upload.previous is not None:
                restore.append(upload)
                event = dataclasses.replace(event, reason=f"{event.reason}; the earlier version is kept")
            elif event.outcome == "skipped":
                discard_copy(upload.path, folder)
            elif upload.previous is not None:
                upload.previous.unlink(missing_ok=True)
        yield event
    for key, upload in kept.items():
        if key not in done:  # cancelled before this file: leave things as they were before the upload
            if upload.previous is not None:
                upload.previous.replace(upload.path)
            else:
                discard_copy(upload.path, folder)
    for upload in restore:
        assert upload.previous is not None
        upload.previous.replace(upload.path)
    if restore:
        for event in documents.ingestor.ingest([u.path for u in restore], info.name):
            if isinstance(event, FileOutcome) and event.outcome == "skipped":
                discard_copy(Path(event.path), folder)  # the earlier version is no longer readable either


def tidy_copies(folder: Path, records: Mapping[str, FileRecord]) -> list[Path]:
    """After a run was killed while it kept uploads in ``folder``: put back a version that an unfinished upload
    replaced, and remove copies the collection does not list (and half-written ones). ``records`` are the
    collection's files by path. Returns what was removed."""
    if not folder.is_dir():
        return []
    removed: list[Path] = []
    for previous in folder.glob(f".*{PREVIOUS_SUFFIX}"):
        current = folder / previous.name[1 : -len(PREVIOUS_SUFFIX)]
        record = records.get(str(current))
        if record is not None and current.exists() and sha256_of(current) == record.sha256:
            previous.unlink()  # the new version was indexed before the kill: the old one is not needed
            removed.append(previous)
        else:
            previous.replace(current)  # the listed version is the one this upload was replacing
    for entry in folder.iterdir():
        if not entry.is_file():
            continue
        if entry.name.endswith(PARTIAL_SUFFIX) or str(entry) not in records:
            entry.unlink()
            removed.append(entry)
    return removed


def discard_copy(path: Path, folder: Path) -> None:
    """Delete ``path`` if it is one of Hearth's own copies under ``folder``; anything else is left alone."""
    if path.resolve().is_relative_to(folder.resolve()):
        path.unlink(missing_ok=True)


def _same_content(source: Path, target: Path) -> bool:
    try:
        if target.stat().st_size != source.stat().st_size:
            return False
    except FileNotFoundError:
        return False
    return sha256_of(source) == sha256_of(target)
