"""What has been indexed: collections and, per file, its hash, size, mtime and status. SQLite, one transaction
per change. A file is recorded as indexed only after its chunks are in the vector store, so a process killed in
between leaves chunks that no row owns: the next run removes them (see ``Ingestor.reconcile``) and indexes that
file again."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from models.shared.database import Database
from models.shared.errors import HearthError
from rag.reading.sections import PASSAGE_FORMAT
from rag.writelock import WriteLock

FileStatus = Literal["indexed", "skipped"]
SCHEMA_VERSION = 3
MAX_NAME_CHARS = 100

_SCHEMA = """
CREATE TABLE IF NOT EXISTS collections (
    name TEXT PRIMARY KEY,
    store_name TEXT NOT NULL UNIQUE,
    embedder TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS files (
    collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    reason TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (collection, path)
);
"""

_MIGRATIONS = {
    # When the collection's chunks last changed without a file's row changing (leftovers of an interrupted run
    # removed): caches built from the collection key on it too.
    2: "ALTER TABLE collections ADD COLUMN changed_at REAL NOT NULL DEFAULT 0",
    # Which way of making passages indexed each file (rag.reading.sections.PASSAGE_FORMAT); rows from before are format
    # 1.
    3: "ALTER TABLE files ADD COLUMN passage_format INTEGER NOT NULL DEFAULT 1",
}


class CollectionError(HearthError):
    """A collection name that cannot be used, or a collection that does not exist."""


@dataclass(frozen=True)
class CollectionInfo:
    name: str
    store_name: str
    embedder: str
    created_at: float
    server: str | None = None  # the Chroma server it lives on (rag/server_collections.py); None: the data folder


@dataclass(frozen=True)
class FileRecord:
    path: str
    sha256: str
    size: int
    mtime_ns: int
    status: FileStatus
    chunks: int
    reason: str
    passage_format: int = PASSAGE_FORMAT


def normalize_name(name: str) -> str:
    """A collection name as the user will see it: trimmed, single spaces, printable, not too long."""
    cleaned = " ".join(name.split())
    if not cleaned:
        raise CollectionError("A collection needs a name.", "Type a name, for example: work notes.")
    if len(cleaned) > MAX_NAME_CHARS:
        raise CollectionError(f"That collection name has {len(cleaned)} characters.", f"Use at most {MAX_NAME_CHARS}.")
    if any(not ch.isprintable() for ch in cleaned):
        raise CollectionError("That collection name contains control characters.", "Use letters, digits and spaces.")
    return cleaned


def store_name_for(name: str, prefix: str = "kb") -> str:
    """Chroma allows 3-512 characters of [a-zA-Z0-9._-]; any display name maps to one, uniquely. ``prefix`` tells
    where the collection lives: "kb" in the data folder (rag/server_collections.py names a server's)."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "kb"
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{prefix}-{slug}-{digest}"


class Manifest:
    def __init__(self, db_path: Path, store_prefix: str = "kb") -> None:
        self._store_prefix = store_prefix
        self._database = Database(
            db_path,
            _SCHEMA,
            SCHEMA_VERSION,
            "documents index",
            "and add your documents again",
            _MIGRATIONS,
            meanwhile="Until then, chat works without documents.",
        )
        self._transaction = self._database.transaction
        self._rows = self._database.rows

    def collections(self) -> list[CollectionInfo]:
        rows = self._rows("SELECT name, store_name, embedder, created_at FROM collections ORDER BY name COLLATE NOCASE")
        return [CollectionInfo(*row) for row in rows]

    def find(self, name: str) -> CollectionInfo | None:
        """The collection called ``name``, ignoring case ("Notes" and "notes" are one collection); an exact match
        wins where older versions let two names differ only in case."""
        rows = self._rows("SELECT name, store_name, embedder, created_at FROM collections WHERE name = ?", (name,))
        if rows:
            return CollectionInfo(*rows[0])
        wanted = name.casefold()
        return next((info for info in self.collections() if info.name.casefold() == wanted), None)

    def get(self, name: str) -> CollectionInfo:
        info = self.find(normalize_name(name))
        if info is None:
            known = ", ".join(c.name for c in self.collections()) or "none yet"
            raise CollectionError(
                f"There is no collection called {name!r} (collections: {known}).",
                "Create it by adding documents: hearth ingest PATH --collection NAME.",
                page_remedy="Create it on the Documents tab (type a name, press Create), or pick one of those.",
            )
        return info

    def create(self, name: str, embedder: str) -> CollectionInfo:
        name = normalize_name(name)
        info = CollectionInfo(name, store_name_for(name, self._store_prefix), embedder, time.time())
        with self._transaction() as db:
            db.execute(
                "INSERT INTO collections (name, store_name, embedder, created_at) VALUES (?,?,?,?)",
                (info.name, info.store_name, info.embedder, info.created_at),
            )
        return info

    def delete_collection(self, name: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM collections WHERE name = ?", (name,))

    def files(self, collection: str) -> dict[str, FileRecord]:
        rows = self._rows(
            "SELECT path, sha256, size, mtime_ns, status, chunks, reason, passage_format FROM files "
            "WHERE collection = ? ORDER BY path",
            (collection,),
        )
        return {row[0]: FileRecord(*row) for row in rows}

    def record(self, collection: str, record: FileRecord) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO files (collection, path, sha256, size, mtime_ns, status, chunks, reason, "
                "updated_at, passage_format) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    collection,
                    record.path,
                    record.sha256,
                    record.size,
                    record.mtime_ns,
                    record.status,
                    record.chunks,
                    record.reason,
                    time.time(),
                    record.passage_format,
                ),
            )

    def forget(self, collection: str, path: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM files WHERE collection = ? AND path = ?", (collection, path))

    def indexed_chunks(self, collection: str) -> int:
        """Chunks the collection's indexed files should have in the vector store, all together."""
        ((total,),) = self._rows(
            "SELECT COALESCE(SUM(chunks), 0) FROM files WHERE collection = ? AND status = 'indexed'", (collection,)
        )
        return int(total)

    @property
    def write_lock(self) -> WriteLock:
        """Taken shared by each "store a file's chunks, then record it" step, exclusively by reconciliation."""
        return WriteLock(self._database.path.with_suffix(".lock"))

    def needs_indexing(self, collection: str, paths: Iterable[str]) -> None:
        """Make the next run index ``paths`` again even if they look unchanged (their chunks went missing)."""
        with self._transaction() as db:
            db.executemany(
                "UPDATE files SET sha256 = '', size = -1, updated_at = ? WHERE collection = ? AND path = ?",
                [(time.time(), collection, path) for path in paths],
            )

    def touch(self, collection: str) -> None:
        """Record that the collection's chunks changed although no file's row did."""
        with self._transaction() as db:
            db.execute("UPDATE collections SET changed_at = ? WHERE name = ?", (time.time(), collection))

    def version(self, collection: str) -> tuple[int, float]:
        """Changes whenever the collection's files or chunks change; caches built from the collection key on it."""
        ((count, latest),) = self._rows(
            "SELECT COUNT(*), MAX(COALESCE(MAX(updated_at), 0), "
            "(SELECT COALESCE(MAX(changed_at), 0) FROM collections WHERE name = ?)) FROM files WHERE collection = ?",
            (collection, collection),
        )
        return int(count), float(latest)

    def close(self) -> None:
        self._database.close()
