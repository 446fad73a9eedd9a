"""Add files and folders to a collection, touching only what changed.

For each file: unchanged size and mtime means nothing to do; otherwise the content hash decides. A changed or
new file is loaded, chunked, embedded and written to the vector store, and only then recorded in the manifest,
so a process killed at any point leaves at worst one file to redo on the next run (chunk ids are deterministic,
so redoing it never duplicates anything). Files that disappeared from a folder are removed from the collection.
Every file gets an outcome; one bad file never stops the others.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from backends.base import CancelToken
from models.gguf import sha256_of
from rag.chunking import Chunk, chunk_sections
from rag.embeddings import Embedder
from rag.loaders import Skipped, load_file
from rag.manifest import CollectionError, CollectionInfo, FileRecord, Manifest, normalize_name
from rag.store import VectorStore

Outcome = Literal["indexed", "unchanged", "skipped", "removed"]
# Chunks gathered across files before one call to the embedder (which then batches them itself, sorted by length,
# so bigger calls pad less): 256 runs about 10% faster than 64 here. Interactive callers pass a smaller number so
# that work waiting between calls (a chat answer) never waits long.
FLUSH_CHUNKS = 256


@dataclass(frozen=True)
class FileOutcome:
    path: str
    outcome: Outcome
    chunks: int = 0
    reason: str = ""


@dataclass(frozen=True)
class IngestProgress:
    files_done: int
    files_total: int
    current: str
    chunks_done: int
    chunks_per_s: float
    eta_s: float | None


@dataclass(frozen=True)
class Candidate:
    path: Path
    root: Path | None
    problem: str | None = None


IngestEvent = FileOutcome | IngestProgress


@dataclass(frozen=True)
class _Prepared:
    key: str
    digest: str
    stat: os.stat_result
    chunks: list[Chunk]


@dataclass
class _Meter:
    """Counts for progress reports; the ETA comes from bytes read so far."""

    total_files: int
    total_bytes: int
    files_done: int = 0
    bytes_done: int = 0
    chunks_done: int = 0
    started: float = field(default_factory=time.perf_counter)

    def progress(self, current: str, finished: bool = False) -> IngestProgress:
        elapsed = time.perf_counter() - self.started
        rate = self.bytes_done / elapsed if elapsed > 0 and self.bytes_done else 0.0
        eta = 0.0 if finished else ((self.total_bytes - self.bytes_done) / rate if rate else None)
        chunk_rate = self.chunks_done / elapsed if elapsed > 0 else 0.0
        return IngestProgress(self.files_done, self.total_files, current, self.chunks_done, chunk_rate, eta)


def discover(paths: Sequence[Path]) -> tuple[list[Candidate], list[Path]]:
    """Files to consider and the folders that were walked (whose vanished files should be removed)."""
    found: list[Candidate] = []
    roots: list[Path] = []
    for given in paths:
        path = given.expanduser()
        if not path.exists():
            found.append(Candidate(path.absolute(), None, "not found"))
        elif path.is_dir():
            root = path.resolve()
            roots.append(root)
            found.extend(_walk(root))
        else:
            found.append(Candidate(path.resolve(), None))
    return found, roots


def _walk(root: Path) -> Iterator[Candidate]:
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            entry = Path(folder) / name
            target = entry.resolve()
            if not target.is_relative_to(root):
                yield Candidate(entry, root, f"it links outside {root.name}/ (to {target}); it was not read")
            elif target.is_file():
                yield Candidate(entry, root)


class Ingestor:
    def __init__(self, manifest: Manifest, store: VectorStore, embedder: Embedder, max_file_bytes: int) -> None:
        self._manifest = manifest
        self._store = store
        self._embedder = embedder
        self._max_file_bytes = max_file_bytes

    def open_collection(self, name: str) -> CollectionInfo:
        """The collection called ``name``, created if new; refused if another embedder built it."""
        info = self._manifest.find(normalize_name(name)) or self._manifest.create(name, self._embedder.name)
        if info.embedder != self._embedder.name:
            raise CollectionError(
                f"Collection {info.name!r} was built with the embedder {info.embedder}; Hearth now embeds with "
                f"{self._embedder.name}, and vectors from different models cannot be mixed.",
                "Delete the collection and add the documents again.",
            )
        return info

    def ingest(
        self,
        paths: Sequence[Path],
        collection: str,
        cancel: CancelToken | None = None,
        before_batch: Callable[[], object] | None = None,
        flush_chunks: int = FLUSH_CHUNKS,
    ) -> Iterator[IngestEvent]:
        """Index ``paths`` into ``collection``, yielding progress and one outcome per file.

        Chunks from several small files are embedded together (the model is several times faster on full
        batches); each file is still stored and recorded on its own, so a crash never leaves a half-recorded file.
        ``before_batch`` runs before each embedding batch (the app uses it to let a chat answer go first).
        """
        cancel = cancel or CancelToken()
        info = self.open_collection(collection)
        candidates, roots = discover(paths)
        known = dict(self._manifest.files(info.name))
        seen: set[str] = set()
        pending: list[_Prepared] = []
        meter = _Meter(total_files=len(candidates), total_bytes=sum(_size(c.path) for c in candidates if not c.problem))
        for candidate in candidates:
            if cancel.cancelled:
                return
            key = str(candidate.path)
            seen.add(key)
            yield meter.progress(candidate.path.name)
            prepared = self._prepare(info, candidate, known, pending)
            meter.bytes_done += _size(candidate.path) if candidate.problem is None else 0
            if isinstance(prepared, FileOutcome):
                meter.files_done += 1
                yield prepared
                continue
            pending.append(prepared)
            if sum(len(p.chunks) for p in pending) >= flush_chunks:
                yield from self._flush(info, pending, known, meter, cancel, before_batch)
                pending = []
        yield from self._flush(info, pending, known, meter, cancel, before_batch)
        yield from self._remove_vanished(info, roots, known, seen)
        yield meter.progress("", finished=True)

    def _prepare(
        self, info: CollectionInfo, candidate: Candidate, known: dict[str, FileRecord], pending: Sequence[_Prepared]
    ) -> FileOutcome | _Prepared:
        """Everything short of embedding: change detection, reading and chunking."""
        key = str(candidate.path)
        if candidate.problem:
            if candidate.root is None:  # a path the user typed that does not exist: nothing to record
                return FileOutcome(key, "skipped", reason=candidate.problem)
            return self._skip(info, key, "", candidate.path.lstat(), candidate.problem, known)
        try:
            stat = candidate.path.stat()
        except OSError as exc:
            return FileOutcome(key, "skipped", reason=f"cannot be read ({exc.strerror})")
        previous = known.get(key)
        if previous and previous.size == stat.st_size and previous.mtime_ns == stat.st_mtime_ns:
            return _as_before(previous)
        if stat.st_size > self._max_file_bytes:
            limit_mb = self._max_file_bytes // (1 << 20)
            reason = f"it is larger than the {limit_mb} MB limit (HEARTH_RAG__MAX_FILE_MB)"
            return self._skip(info, key, "", stat, reason, known)
        try:
            digest = sha256_of(candidate.path)
        except OSError as exc:
            return FileOutcome(key, "skipped", reason=f"cannot be read ({exc.strerror})")
        if previous and previous.sha256 == digest:
            known[key] = dataclasses.replace(previous, size=stat.st_size, mtime_ns=stat.st_mtime_ns)
            self._manifest.record(info.name, known[key])
            return _as_before(previous)
        twin = next((p.key for p in pending if p.digest == digest), None) or next(
            (r.path for r in known.values() if r.sha256 == digest and r.path != key and r.status == "indexed"), None
        )
        if twin and Path(twin).exists():
            reason = f"same content as {Path(twin).name}, already in this collection"
            return self._skip(info, key, digest, stat, reason, known)
        try:
            sections = load_file(candidate.path)
        except Skipped as skipped:
            return self._skip(info, key, digest, stat, skipped.reason, known)
        chunks = chunk_sections(sections, self._embedder.tokenizer(), digest, self._embedder.max_tokens)
        return _Prepared(key, digest, stat, chunks)

    def _flush(
        self,
        info: CollectionInfo,
        pending: Sequence[_Prepared],
        known: dict[str, FileRecord],
        meter: _Meter,
        cancel: CancelToken,
        before_batch: Callable[[], object] | None,
    ) -> Iterator[FileOutcome]:
        if not pending:
            return
        if cancel.cancelled:
            for prepared in pending:
                yield FileOutcome(prepared.key, "skipped", reason="cancelled before it was indexed")
            return
        if before_batch is not None:
            before_batch()
        texts = [chunk.text for prepared in pending for chunk in prepared.chunks]
        vectors = self._embedder.embed(texts)
        offset = 0
        for prepared in pending:
            count = len(prepared.chunks)
            self._store.replace_file(
                info.store_name, info.embedder, prepared.key, prepared.chunks, vectors[offset : offset + count]
            )
            offset += count
            record = FileRecord(
                prepared.key, prepared.digest, prepared.stat.st_size, prepared.stat.st_mtime_ns, "indexed", count, ""
            )
            self._manifest.record(info.name, record)
            known[prepared.key] = record
            meter.files_done += 1
            meter.chunks_done += count
            yield FileOutcome(prepared.key, "indexed", count)

    def _skip(
        self,
        info: CollectionInfo,
        key: str,
        digest: str,
        stat: os.stat_result,
        reason: str,
        known: dict[str, FileRecord],
    ) -> FileOutcome:
        # A file that used to be indexed and is now unreadable keeps nothing stale in the store.
        self._store.remove_file(info.store_name, info.embedder, key)
        record = FileRecord(key, digest, stat.st_size, stat.st_mtime_ns, "skipped", 0, reason)
        self._manifest.record(info.name, record)
        known[key] = record
        return FileOutcome(key, "skipped", reason=reason)

    def _remove_vanished(
        self, info: CollectionInfo, roots: Iterable[Path], known: dict[str, FileRecord], seen: set[str]
    ) -> Iterator[FileOutcome]:
        for key in sorted(known):
            if key in seen or not any(Path(key).is_relative_to(root) for root in roots):
                continue
            if Path(key).exists():
                continue  # hidden or otherwise not walked this time, but still there
            self._store.remove_file(info.store_name, info.embedder, key)
            self._manifest.forget(info.name, key)
            yield FileOutcome(key, "removed", reason="the file is gone from the folder")

    def remove_file(self, collection: str, path: str) -> None:
        info = self._manifest.get(collection)
        self._store.remove_file(info.store_name, info.embedder, path)
        self._manifest.forget(info.name, path)

    def delete_collection(self, collection: str) -> None:
        info = self._manifest.get(collection)
        self._store.drop(info.store_name)
        self._manifest.delete_collection(info.name)


def _as_before(record: FileRecord) -> FileOutcome:
    if record.status == "skipped":
        return FileOutcome(record.path, "skipped", reason=record.reason)
    return FileOutcome(record.path, "unchanged", record.chunks)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
