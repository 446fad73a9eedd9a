"""What Hearth knows of its collections on a Chroma server, kept on the server itself, so every
Hearth pointed at the server sees the same collections and files: one added by one Hearth is known to the others,
and never added twice.

The ledger is one Chroma collection on the server (``LEDGER``), each record a row keyed by a fixed id: a collection
(its name, Chroma name, embedder), a file of a collection (its hash, size, passages, status) and a collection's last
change (a random number and the time, what caches key on). Chroma stores one record at a time, so a row is written
whole or not at all, and two Hearths writing the same row leave one of them. The order of writing is the safety:

- A file's passages are written before its row (``Ingestor._flush``), and their ids come from the file's content
  (``rag.chunking.chunk_id``): a Hearth killed in between leaves passages that no row owns, which search leaves out
  (``Retriever.candidates`` keeps only passages of recorded files) and the next ingest writes again under the same
  ids, so nothing is doubled. Another Hearth's reconciliation removes such passages only once they are an hour old
  (``rag.reconcile.GRACE_S``): younger ones may be a file still being added elsewhere.
- A collection's row is added, never overwritten: two Hearths creating one name at once end with the first one's
  embedder, and the second is told if its own differs.

What the ledger said last is mirrored in the data folder (a :class:`Manifest` per server), so the collections are
still listed while the server cannot be reached; their searches then fail, naming it. A mirror written by a Hearth
from before the ledger is copied to the server once, the first time it is reached.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from rag.chroma_server import ChromaServer, ChromaServerUnreachable, answered, server_client
from rag.manifest import (
    CollectionError,
    CollectionInfo,
    FileRecord,
    FileStatus,
    Manifest,
    normalize_name,
    store_name_for,
)
from rag.writelock import WriteLock

LEDGER = "hearth-ledger"
UNIT = [1.0]  # Chroma keeps a vector with every record; the ledger's rows need none, so each gets this one
LISTED_S = 2.0  # how long the server's list of collections is taken as it was (another Hearth's new one: that late)
SHARED_SUFFIX = ".shared"  # beside a mirror: its rows are on the server (copied once, or written there from the first)

T = TypeVar("T")


def _collection_id(store_name: str) -> str:
    return f"collection:{store_name}"


def _change_id(store_name: str) -> str:
    return f"changed:{store_name}"


def _file_id(store_name: str, path: str) -> str:
    return f"file:{store_name}:{hashlib.sha256(path.encode()).hexdigest()[:40]}"


def _collection_info(row: dict[str, Any]) -> CollectionInfo:
    return CollectionInfo(str(row["name"]), str(row["store_name"]), str(row["embedder"]), float(row["created_at"]))


def _file_row(store_name: str, record: FileRecord) -> dict[str, str | int | float]:
    return {
        "kind": "file",
        "store_name": store_name,
        "path": record.path,
        "sha256": record.sha256,
        "size": record.size,
        "mtime_ns": record.mtime_ns,
        "status": record.status,
        "chunks": record.chunks,
        "reason": record.reason,
        "passage_format": record.passage_format,
        "updated_at": time.time(),
    }


def _change_row(store_name: str) -> dict[str, str | int | float]:
    """A collection's version: a random number (two Hearths' clocks may disagree) and the time."""
    return {"kind": "change", "store_name": store_name, "nonce": secrets.randbits(31), "at": time.time()}


def _file_record(row: dict[str, Any]) -> FileRecord:
    status: FileStatus = "indexed" if row.get("status") == "indexed" else "skipped"
    return FileRecord(
        str(row["path"]),
        str(row.get("sha256", "")),
        int(row.get("size", -1)),
        int(row.get("mtime_ns", 0)),
        status,
        int(row.get("chunks", 0)),
        str(row.get("reason", "")),
        int(row.get("passage_format", 1)),
    )


class Ledger:
    """The ledger's rows on ``server``: connected on first use, and again after a failure."""

    def __init__(self, server: ChromaServer) -> None:
        self.server = server
        self._rows: Any = None
        self._lock = threading.Lock()

    def _table(self) -> Any:
        with self._lock:
            if self._rows is None:
                with answered(self.server):
                    self._rows = server_client(self.server).get_or_create_collection(
                        LEDGER, embedding_function=None, metadata={"hearth": "ledger of Hearth's collections"}
                    )
            return self._rows

    def _call(self, work: Callable[[Any], T]) -> T:
        table = self._table()
        try:
            with answered(self.server):
                return work(table)
        except ChromaServerUnreachable:
            with self._lock:
                self._rows = None  # reached again from the start on the next call
            raise

    def collections(self) -> list[CollectionInfo]:
        got = self._call(lambda rows: rows.get(where={"kind": "collection"}, include=["metadatas"]))
        found = [_collection_info(m) for m in got["metadatas"] if m]
        return sorted(found, key=lambda info: info.name.casefold())

    def add_collection(self, info: CollectionInfo) -> CollectionInfo:
        """The collection's row, added unless the server has one of that name: then the one there (made by another
        Hearth, perhaps at the same moment)."""
        row: dict[str, Any] = {
            "kind": "collection",
            "name": info.name,
            "store_name": info.store_name,
            "embedder": info.embedder,
            "created_at": info.created_at,
        }
        key = _collection_id(info.store_name)
        got = self._call(
            lambda rows: (
                rows.add(ids=[key], embeddings=[UNIT], metadatas=[row]),
                rows.get(ids=[key], include=["metadatas"]),
            )[1]
        )
        return _collection_info(got["metadatas"][0] if got["metadatas"] else row)

    def delete_collection(self, store_name: str) -> None:
        """Its row first (it is no longer listed), then its files' rows."""
        self._call(lambda rows: rows.delete(ids=[_collection_id(store_name), _change_id(store_name)]))
        self._call(lambda rows: rows.delete(where={"store_name": store_name}))

    def files(self, store_name: str) -> dict[str, FileRecord]:
        got = self._call(
            lambda rows: rows.get(where={"$and": [{"kind": "file"}, {"store_name": store_name}]}, include=["metadatas"])
        )
        records = [_file_record(m) for m in got["metadatas"] if m]
        return {record.path: record for record in sorted(records, key=lambda r: r.path)}

    def record(self, store_name: str, records: Iterable[FileRecord]) -> None:
        """The files' rows and the collection's change, in one request (one row each, each whole)."""
        listed = list(records)
        ids = [_file_id(store_name, r.path) for r in listed] + [_change_id(store_name)]
        rows = [_file_row(store_name, r) for r in listed] + [_change_row(store_name)]
        self._call(lambda table: table.upsert(ids=ids, embeddings=[UNIT] * len(ids), metadatas=rows))

    def forget(self, store_name: str, path: str) -> None:
        self._call(lambda rows: rows.delete(ids=[_file_id(store_name, path)]))
        self.changed(store_name)

    def changed(self, store_name: str) -> None:
        """A new value of the collection's version: every Hearth's caches built from it are built again."""
        row = _change_row(store_name)
        self._call(lambda rows: rows.upsert(ids=[_change_id(store_name)], embeddings=[UNIT], metadatas=[row]))

    def version(self, store_name: str) -> tuple[int, float]:
        got = self._call(lambda rows: rows.get(ids=[_change_id(store_name)], include=["metadatas"]))
        row = got["metadatas"][0] if got["metadatas"] else None
        return (int(row["nonce"]), float(row["at"])) if row else (0, 0.0)


class SharedManifest(Manifest):
    """A server's collections as a :class:`Manifest`, read from and written to its :class:`Ledger`, with the data
    folder's ``mirror`` of what it said last answering while the server cannot be reached."""

    def __init__(self, ledger: Ledger, mirror: Manifest, mirror_path: Path, prefix: str) -> None:
        self._ledger = ledger
        self._mirror = mirror
        self._shared_marker = mirror_path.with_name(mirror_path.name + SHARED_SUFFIX)
        self._prefix = prefix
        self._copied = threading.Lock()
        self._shared = False  # the marker seen (or written) once: not looked for again on every call
        self._listed: tuple[float, list[CollectionInfo]] | None = None

    def _from_server(self, read: Callable[[], T], meanwhile: Callable[[], T]) -> T:
        """``read`` from the server; ``meanwhile`` from the mirror when it cannot be reached."""
        try:
            self._copy_mirror_once()
            return read()
        except ChromaServerUnreachable:
            return meanwhile()

    def _copy_mirror_once(self) -> None:
        """A mirror written before the ledger: its collections and files, copied to the server (where the server
        has none of that name), once."""
        if self._shared:
            return
        with self._copied:
            if self._shared or self._shared_marker.exists():
                self._shared = True
                return
            there = {info.name for info in self._ledger.collections()}
            for info in self._mirror.collections():
                if info.name not in there:
                    self._ledger.add_collection(info)
                    self._ledger.record(info.store_name, self._mirror.files(info.name).values())
            self._shared_marker.touch(mode=0o600)
            self._shared = True

    def _mirrored(self, found: list[CollectionInfo]) -> list[CollectionInfo]:
        """The mirror made to list what the server does."""
        kept = {info.name: info for info in self._mirror.collections()}
        for info in found:
            if info.name not in kept:
                self._mirror.create(info.name, info.embedder)
        for name in kept.keys() - {info.name for info in found}:
            self._mirror.delete_collection(name)
        return found

    def collections(self) -> list[CollectionInfo]:
        """As the server lists them, read again after ``LISTED_S`` (a search asks for its collection several
        times) or after this Hearth made or deleted one."""
        listed = self._listed
        if listed is not None and time.monotonic() - listed[0] < LISTED_S:
            return list(listed[1])
        found = self._from_server(lambda: self._mirrored(self._ledger.collections()), self._mirror.collections)
        self._listed = (time.monotonic(), found)
        return list(found)

    def find(self, name: str) -> CollectionInfo | None:
        listed = self.collections()
        exact = next((info for info in listed if info.name == name), None)
        wanted = name.casefold()
        return exact or next((info for info in listed if info.name.casefold() == wanted), None)

    def create(self, name: str, embedder: str) -> CollectionInfo:
        name = normalize_name(name)
        self._copy_mirror_once()
        self._listed = None
        made = self._ledger.add_collection(
            CollectionInfo(name, store_name_for(name, self._prefix), embedder, time.time())
        )
        if made.embedder != embedder:
            raise CollectionError(
                f"Another Hearth made the collection {made.name!r} on the Chroma server {self._ledger.server.shown} "
                f"a moment ago, with the embedder {made.embedder}; this Hearth embeds with {embedder}.",
                "Give this collection another name.",
            )
        if self._mirror.find(made.name) is None:
            self._mirror.create(made.name, made.embedder)
        return made

    def delete_collection(self, name: str) -> None:
        self._listed = None
        self._ledger.delete_collection(store_name_for(name, self._prefix))
        self._mirror.delete_collection(name)

    def files(self, collection: str) -> dict[str, FileRecord]:
        def read() -> dict[str, FileRecord]:
            records = self._ledger.files(store_name_for(collection, self._prefix))
            if self._mirror.find(collection) is not None:
                mirrored = self._mirror.files(collection)
                for path, record in records.items():
                    if mirrored.get(path) != record:
                        self._mirror.record(collection, record)
                for path in mirrored.keys() - records.keys():
                    self._mirror.forget(collection, path)
            return records

        return self._from_server(read, lambda: self._mirror.files(collection))

    def record(self, collection: str, record: FileRecord) -> None:
        self._ledger.record(store_name_for(collection, self._prefix), [record])
        if self._mirror.find(collection) is not None:
            self._mirror.record(collection, record)

    def forget(self, collection: str, path: str) -> None:
        self._ledger.forget(store_name_for(collection, self._prefix), path)
        self._mirror.forget(collection, path)

    def indexed_chunks(self, collection: str) -> int:
        return sum(r.chunks for r in self.files(collection).values() if r.status == "indexed")

    @property
    def write_lock(self) -> WriteLock:
        """This computer's Hearths' (other computers' are kept apart by ``rag.reconcile.GRACE_S``)."""
        return self._mirror.write_lock

    def needs_indexing(self, collection: str, paths: Iterable[str]) -> None:
        wanted = set(paths)
        again = [replace(r, sha256="", size=-1) for path, r in self.files(collection).items() if path in wanted]
        self._ledger.record(store_name_for(collection, self._prefix), again)

    def touch(self, collection: str) -> None:
        self._ledger.changed(store_name_for(collection, self._prefix))

    def version(self, collection: str) -> tuple[int, float]:
        return self._from_server(
            lambda: self._ledger.version(store_name_for(collection, self._prefix)),
            lambda: self._mirror.version(collection),
        )

    def close(self) -> None:
        self._mirror.close()


def listed_passages(manifest: Manifest) -> Callable[[str], str | None]:
    """For ``VectorStore.on_server``: the collection of ``manifest`` stored under a Chroma name, when its records list
    passages there (None otherwise)."""

    def collection_of(store_name: str) -> str | None:
        for info in manifest.collections():
            if info.store_name == store_name:
                return info.name if manifest.indexed_chunks(info.name) else None
        return None

    return collection_of
