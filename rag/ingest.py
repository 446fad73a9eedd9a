"""Add files and folders to a collection, touching only what changed.

For each file: unchanged size and mtime means nothing to do; otherwise the content hash decides. A changed or
new file is loaded, chunked, embedded and written to the vector store, and only then recorded in the manifest,
so a process killed at any point leaves at worst one file to redo on the next run (chunk ids are deterministic,
so redoing it never duplicates anything). Files that disappeared from a folder are removed from the collection.
Every file gets an outcome; one bad file never stops the others. Each run starts by reconciling the vector store
with the manifest (:meth:`Ingestor.reconcile`), which removes the chunks a killed run left behind.

Progress is reported within a file too (pages read, passages embedded, with their rate), and Cancel is looked at
between pages and between small embedding batches, so it takes effect in a second or so even in the middle of a
long file. A file cancelled part-way is not written at all (its chunks go to the store only once all are embedded),
so what was indexed before it stays, the store and the manifest agree, and the next run indexes it from the start.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR
from typing import Literal

import numpy as np

from backends.base import CancelToken
from models.gguf import sha256_of
from rag.chunking import Chunk, chunk_sections, searchable_text
from rag.discovery import Candidate, discover, unreadable_reason
from rag.ingest_progress import IngestProgress, Meter, StepProgress
from rag.manifest import CollectionError, CollectionInfo, FileRecord, Manifest, normalize_name
from rag.reading.reader import DocumentReader, ReadCancelled, ReaderProcess, relay
from rag.reading.sections import PASSAGE_FORMAT, Skipped
from rag.reconcile import GRACE_S, ReconcilePlan, plan_reconciliation
from rag.retrieval.embeddings import Embedder
from rag.store import VectorStore

__all__ = ["FileOutcome", "IngestEvent", "IngestProgress", "Ingestor", "StepProgress"]

log = logging.getLogger(__name__)

Outcome = Literal["indexed", "unchanged", "skipped", "removed"]
# Chunks gathered across files before they are embedded together, longest first, so that each batch holds texts of
# similar length and pads little: 256 runs about 10% faster than 64 here. Interactive callers pass a smaller number
# so that rows appear sooner.
FLUSH_CHUNKS = 256
# Passages are given to the embedder a few at a time; between two calls Cancel is looked at, progress reported and
# a chat answer let go first. Each call aims at about EMBED_CALL_S of work, whatever the machine and its load: 32
# passages took 0.8 s on an idle 2-core machine and 9 s on a busy one.
EMBED_CALL_S = 0.5
# Longest time files already read wait for more to be embedded with them; and a file of more bytes than a group's
# passages usually take (about a kilobyte each) is not waited for.
GROUP_WAIT_S = 2.0
BYTES_PER_PASSAGE = 1024
EMBED_SLICE_FIRST = 8
EMBED_SLICE_MIN = 2
EMBED_SLICE_MAX = 64
CANCELLED_READING = "cancelled while it was being read"
CANCELLED_INDEXING = "cancelled before it was indexed; nothing of it was kept"


@dataclass(frozen=True)
class FileOutcome:
    path: str
    outcome: Outcome
    chunks: int = 0
    reason: str = ""
    cancelled: bool = False  # skipped because Cancel came while it was read or embedded: nothing of it was recorded


IngestEvent = FileOutcome | IngestProgress


@dataclass(frozen=True)
class _Prepared:
    key: str
    digest: str
    stat: os.stat_result
    chunks: list[Chunk]


class Ingestor:
    def __init__(
        self,
        manifest: Manifest,
        store: VectorStore,
        embedder: Embedder,
        max_file_bytes: int,
        reader: DocumentReader | None = None,
    ) -> None:
        self._manifest = manifest
        self._store = store
        self._embedder = embedder
        self._max_file_bytes = max_file_bytes
        # Files are read in a separate process, within limits of text, pages, time and memory (rag.reading.reader).
        self._reader = reader or ReaderProcess()

    def close(self) -> None:
        """Stop the process that reads files (a read in progress ends as cancelled)."""
        self._reader.close()

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
        leftovers = self.reconcile(info)
        candidates, roots = discover(paths)
        known = dict(self._manifest.files(info.name))
        seen: set[str] = set()
        pending: list[_Prepared] = []
        grouped = time.monotonic()  # when the first of the pending files was read
        meter = Meter(total_files=len(candidates), total_bytes=sum(_size(c.path) for c in candidates if not c.problem))
        for candidate in candidates:
            if cancel.cancelled:
                break
            waited = time.monotonic() - grouped > GROUP_WAIT_S
            if pending and (waited or _size(candidate.path) > flush_chunks * BYTES_PER_PASSAGE):
                # Files read a while ago, or before one that will take long, are not kept waiting: their rows
                # appear now.
                yield from self._flush(info, pending, known, meter, cancel, before_batch)
                pending = []
            key = str(candidate.path)
            seen.add(key)
            meter.next_file(candidate.path.name)
            yield meter.progress()
            prepared = yield from self._prepare(info, candidate, known, pending, meter, cancel)
            if isinstance(prepared, FileOutcome):
                meter.files_done += 1
                meter.bytes_done += _size(candidate.path) if candidate.problem is None else 0
                yield prepared
                continue
            if not pending:
                grouped = time.monotonic()
            pending.append(prepared)
            if sum(len(p.chunks) for p in pending) >= flush_chunks:
                yield from self._flush(info, pending, known, meter, cancel, before_batch)
                pending = []
        yield from self._flush(info, pending, known, meter, cancel, before_batch)
        if not cancel.cancelled:  # files not looked at are not gone
            yield from self._remove_vanished(info, roots, known, seen)
        for path in leftovers.orphans:
            if path not in seen:  # a file indexed again in this run is reported as indexed instead
                yield FileOutcome(path, "removed", reason="a run that was interrupted had left it in the index")
        yield meter.finished()

    def _prepare(
        self,
        info: CollectionInfo,
        candidate: Candidate,
        known: dict[str, FileRecord],
        pending: Sequence[_Prepared],
        meter: Meter,
        cancel: CancelToken,
    ) -> Generator[IngestProgress, None, FileOutcome | _Prepared]:
        """Everything short of embedding: change detection, reading (yielding its progress) and chunking."""
        key = str(candidate.path)
        if candidate.problem:
            try:
                entry = candidate.path.lstat()
            except OSError:
                entry = None
            if candidate.root is None or entry is None:  # a path the user typed that does not exist, or gone
                return FileOutcome(key, "skipped", reason=candidate.problem)
            return self._skip(info, key, "", entry, candidate.problem, known)
        try:
            stat = candidate.path.stat()
        except OSError as exc:
            return FileOutcome(key, "skipped", reason=unreadable_reason(exc, candidate.path.is_symlink()))
        previous = known.get(key)
        # A file refused before is read again when it is named on its own (added again by hand, perhaps after a
        # limit was raised); in a folder it keeps its reason until it changes.
        again = previous is not None and previous.status == "skipped" and candidate.root is None
        # Indexed by an older way of making passages: read again so it gets the better passages.
        again = again or (previous is not None and previous.passage_format < PASSAGE_FORMAT)
        if previous and not again and previous.size == stat.st_size and previous.mtime_ns == stat.st_mtime_ns:
            return _as_before(previous)
        if stat.st_size > self._max_file_bytes:
            limit_mb = self._max_file_bytes // (1 << 20)
            reason = f"it is larger than the {limit_mb} MB limit (HEARTH_RAG__MAX_FILE_MB)"
            return self._skip(info, key, "", stat, reason, known)
        try:
            digest = sha256_of(candidate.path)
        except OSError as exc:
            return self._skip(info, key, "", stat, unreadable_reason(exc, candidate.path.is_symlink()), known)
        if previous and not again and previous.sha256 == digest:
            known[key] = dataclasses.replace(previous, size=stat.st_size, mtime_ns=stat.st_mtime_ns)
            self._manifest.record(info.name, known[key])
            return _as_before(previous)
        twin = next((p.key for p in pending if p.digest == digest), None) or next(
            (r.path for r in known.values() if r.sha256 == digest and r.path != key and r.status == "indexed"), None
        )
        # On a server the twin may be another Hearth's file, on another computer: its passages are there all the same.
        if twin and (info.server is not None or Path(twin).exists()):
            reason = f"same content as {Path(twin).name}, already in this collection"
            return self._skip(info, key, digest, stat, reason, known)
        meter.begin_step()
        reading = self._reader.reading(candidate.path, cancel)
        try:
            sections = yield from relay(
                reading, lambda read: meter.progress(meter.step("reading", read.pages_done, read.pages_total))
            )
        except ReadCancelled:  # nothing recorded: the next run reads it again
            return FileOutcome(key, "skipped", reason=CANCELLED_READING, cancelled=True)
        except Skipped as skipped:
            return self._skip(info, key, digest, stat, skipped.reason, known)
        meter.begin_step()
        yield meter.progress(meter.step("splitting", total=len(sections)))
        chunks = chunk_sections(sections, self._embedder.tokenizer(), digest, self._embedder.max_tokens)
        return _Prepared(key, digest, stat, chunks)

    def _flush(
        self,
        info: CollectionInfo,
        pending: Sequence[_Prepared],
        known: dict[str, FileRecord],
        meter: Meter,
        cancel: CancelToken,
        before_batch: Callable[[], object] | None,
    ) -> Iterator[IngestEvent]:
        """Embed the chunks of ``pending`` files, then store and record each file (and yield its outcome). Cancel
        before the last passage is embedded leaves all of them unwritten."""
        if not pending:
            return
        texts = [searchable_text(chunk.text, chunk.section) for prepared in pending for chunk in prepared.chunks]
        meter.embedding_bytes = sum(prepared.stat.st_size for prepared in pending)
        try:
            vectors = yield from self._embed(texts, len(pending), meter, cancel, before_batch)
        finally:
            meter.embedding_bytes = 0
        if vectors is None:
            for prepared in pending:
                meter.files_done += 1
                yield FileOutcome(prepared.key, "skipped", reason=CANCELLED_INDEXING, cancelled=True)
            return
        offset = 0
        for prepared in pending:
            count = len(prepared.chunks)
            record = FileRecord(
                prepared.key, prepared.digest, prepared.stat.st_size, prepared.stat.st_mtime_ns, "indexed", count, ""
            )
            with self._manifest.write_lock.shared():  # reconciliation never runs between these two writes
                self._store.replace_file(
                    info.store_name, info.embedder, prepared.key, prepared.chunks, vectors[offset : offset + count]
                )
                self._manifest.record(info.name, record)
            offset += count
            known[prepared.key] = record
            meter.files_done += 1
            meter.bytes_done += prepared.stat.st_size
            meter.chunks_done += count
            yield FileOutcome(prepared.key, "indexed", count)

    def _embed(
        self,
        texts: Sequence[str],
        files: int,
        meter: Meter,
        cancel: CancelToken,
        before_batch: Callable[[], object] | None,
    ) -> Generator[IngestProgress, None, np.ndarray | None]:
        """The vectors of ``texts`` in their order, embedded a slice at a time, longest first (the grouping the model
        would make of one big call, so batches pad as little); ``None`` if cancelled first."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        vectors: np.ndarray | None = None
        meter.begin_step()
        yield meter.progress(meter.step("embedding", 0, len(texts), files))
        start, size = 0, EMBED_SLICE_FIRST
        while start < len(order):
            if before_batch is not None and not cancel.cancelled:
                before_batch()
            if cancel.cancelled:
                return None
            rows = order[start : start + size]
            began = time.perf_counter()
            batch = self._embedder.embed([texts[i] for i in rows])
            size = next_slice(len(rows), time.perf_counter() - began)
            if vectors is None:
                vectors = np.empty((len(texts), batch.shape[1]), dtype=np.float32)
            vectors[rows] = batch
            start += len(rows)
            yield meter.progress(meter.step("embedding", start, len(texts), files))
        return vectors  # all embedded: kept, even if Cancel came during the last batch

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
            if _still_there(Path(key)):
                continue  # hidden or otherwise not walked this time (in a folder that cannot be opened), but there
            self._store.remove_file(info.store_name, info.embedder, key)
            self._manifest.forget(info.name, key)
            yield FileOutcome(key, "removed", reason="the file is gone from the folder")

    def reconcile(self, info: CollectionInfo) -> ReconcilePlan:
        """Make the vector store agree with the manifest: remove chunks that no indexed file owns (a run killed
        between storing a file's chunks and recording it leaves such chunks, and they would stay searchable), and
        mark files whose chunks are missing to be indexed again. When the chunk counts of both sides agree (the
        usual case) that is all it reads: one count each side."""
        with self._manifest.write_lock.exclusive():  # no other run is between storing and recording a file
            if self._store.count(info.store_name, info.embedder) == self._manifest.indexed_chunks(info.name):
                return ReconcilePlan({}, [])
            indexed = {path: r.chunks for path, r in self._manifest.files(info.name).items() if r.status == "indexed"}
            stored = self._store.chunk_ids_by_path(info.store_name, info.embedder)
            # On a server, passages written lately may be another Hearth's file on its way (its record comes last).
            recent = self._store.written_since(info.store_name, info.embedder, time.time() - GRACE_S)
            plan = plan_reconciliation(indexed, stored, recent)
            if plan.orphans:
                self._store.remove_chunks(info.store_name, info.embedder, plan.orphan_ids)
                self._manifest.touch(info.name)
            if plan.missing:
                self._manifest.needs_indexing(info.name, plan.missing)
        if plan.orphans:
            log.info("collection %r: removed %d chunks that no file owned", info.name, len(plan.orphan_ids))
        if plan.missing:
            log.info(
                "collection %r: %d files lost their chunks and will be indexed again", info.name, len(plan.missing)
            )
        return plan

    def reconcile_all(self) -> None:
        """Reconcile every collection (at start-up: cheap when nothing is wrong)."""
        for info in self._manifest.collections():
            self.reconcile(info)

    def remove_file(self, collection: str, path: str) -> None:
        info = self._manifest.get(collection)
        self._store.remove_file(info.store_name, info.embedder, path)
        self._manifest.forget(info.name, path)

    def delete_collection(self, collection: str) -> None:
        info = self._manifest.get(collection)
        self._store.drop(info.store_name)
        self._manifest.delete_collection(info.name)


def next_slice(size: int, took_s: float) -> int:
    """How many passages to embed in the next call, after ``size`` took ``took_s``: about ``EMBED_CALL_S`` of
    work, growing at most twofold a step (the passages come longest first, so later ones go faster)."""
    if took_s <= 0:
        return min(size * 2, EMBED_SLICE_MAX)
    fitting = int(size * EMBED_CALL_S / took_s)
    return max(EMBED_SLICE_MIN, min(fitting, size * 2, EMBED_SLICE_MAX))


def _as_before(record: FileRecord) -> FileOutcome:
    if record.status == "skipped":
        return FileOutcome(record.path, "skipped", reason=record.reason)
    return FileOutcome(record.path, "unchanged", record.chunks)


def _still_there(path: Path) -> bool:
    """Whether a file the walk did not list still exists. A folder's own record (it could not be opened) goes once
    the folder opens; a file that cannot even be looked at (its folder is locked) is kept."""
    try:
        return not S_ISDIR(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
