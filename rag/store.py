"""Chunks and their vectors in Chroma's embedded PersistentClient: one Chroma collection per knowledge base,
in the data directory, or on a Chroma server (``VectorStore.on_server``, rag/chroma_server.py). Chroma never embeds
anything itself here (its default embedder would download a model): vectors always come from Hearth's embedder.

Chroma's own errors stop here. A damaged store makes Chroma raise ``InternalError`` or ``InvalidArgumentError``
with the text of a Rust error, or panic in its Rust core (``pyo3_runtime.PanicException``, which derives from
``BaseException``, so ``except Exception`` lets it through); every one becomes :class:`DamagedStore`, naming the
folder and `hearth repair`. Before Chroma opens the folder, the small tables it reads at start-up are read here
first: damage there makes Chroma 1.5 panic (and print the panic to the terminal) instead of raising. A server's
failures name the server (``ChromaServerUnreachable``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.shared.database import DamagedStore, damaged, disk_full, first_complaint, is_damage, is_disk_full
from models.shared.errors import StorageError
from rag.chroma_server import ChromaServer, ServerCollectionGone, answered, server_client
from rag.chunking import Chunk

WRITE_BATCH = 512
READ_PAGE = 5000
WHAT = "documents vector store"
MEANWHILE = "Until then, chat works without documents."
REPAIR_MARKER_SUFFIX = ".needs-repair"
CHROMA_DB = "chroma.sqlite3"
WRITTEN_AT = "written_at"  # a server passage's metadata: when it was written (seconds, the writer's clock)
# What Chroma 1.5 reads when a client opens; a damaged page in any of these makes it panic.
STARTUP_TABLES = (
    "migrations",
    "tenants",
    "databases",
    "collections",
    "collection_metadata",
    "segments",
    "segment_metadata",
    "max_seq_id",
)


@dataclass(frozen=True)
class StoredChunk:
    id: str
    text: str
    path: str
    page: int | None
    section: str | None
    index: int


@dataclass(frozen=True)
class ExportedPage:
    """A page of a collection's chunks as stored: ids, vectors, texts and metadata (for copying a collection)."""

    ids: list[str]
    vectors: np.ndarray
    texts: list[str]
    metadatas: list[dict[str, Any]]


class VectorStore:
    """The collections' chunks in Chroma: embedded in ``directory``, or on a Chroma server (``on_server``)."""

    def __init__(self, directory: Path) -> None:
        import chromadb
        from chromadb.config import Settings

        self.directory = directory
        self.server: ChromaServer | None = None
        self._expected: Callable[[str], str | None] = _nothing_expected
        self._know_chroma_errors()
        check_startup_tables(directory / CHROMA_DB)
        with self._guarded():
            self._client = chromadb.PersistentClient(
                path=str(directory), settings=Settings(anonymized_telemetry=False, allow_reset=False)
            )
        self._lock = threading.Lock()

    @classmethod
    def on_server(cls, server: ChromaServer, expected: Callable[[str], str | None] | None = None) -> VectorStore:
        """The chunks on a Chroma server (rag/chroma_server.py): the same calls, over its HTTP API. A request the
        server does not answer fails with :class:`ChromaServerUnreachable`, naming it. ``expected``: for a Chroma
        collection's name, the Hearth collection whose passages the server's ledger lists there (None when it lists
        none); reading one that the server no longer has fails with :class:`ServerCollectionGone` instead of making
        it again, empty. Any Hearth pointed at the server reads and writes its collections (rag/server_ledger.py)."""
        store = cls.__new__(cls)
        store.directory = Path(server.shown)  # named in messages
        store.server = server
        store._expected = expected or _nothing_expected
        store._know_chroma_errors()
        store._client = server_client(server)
        store._lock = threading.Lock()
        return store

    def _know_chroma_errors(self) -> None:
        from chromadb.errors import ChromaError, InternalError, InvalidArgumentError, NotFoundError

        self._chroma_error = ChromaError
        self._not_found = NotFoundError
        self._damage_errors: tuple[type[BaseException], ...] = (InternalError, InvalidArgumentError)

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        """Chroma's errors and panics as Hearth's typed errors."""
        if self.server is not None:
            with answered(self.server):
                yield
            return
        try:
            yield
        except self._chroma_error as exc:
            if is_disk_full(exc, self.directory):  # Chroma says "database or disk is full" only in its text
                raise disk_full(WHAT, self.directory) from exc
            if isinstance(exc, self._damage_errors):
                raise _damaged(self.directory, f"Chroma: {exc}") from exc
            raise StorageError(
                f"The {WHAT} {self.directory} refused a request ({exc}).",
                "If this happens again, stop Hearth and run `hearth repair`.",
                page_remedy="If this happens again, close Hearth and start it again: it checks its stores as it "
                "starts and repairs a damaged one.",
            ) from exc
        except BaseException as exc:
            if isinstance(exc, OSError) and is_disk_full(exc):
                raise disk_full(WHAT, self.directory) from exc
            if not is_rust_panic(exc):
                raise
            if is_disk_full(exc, self.directory):
                raise disk_full(WHAT, self.directory) from exc
            raise _damaged(self.directory, f"Chroma stopped with an internal panic: {exc}") from None

    def _collection(self, store_name: str, embedder: str, reading: bool = False) -> Any:
        # Looked up each time (about 0.7 ms): a cached handle would go stale if another Hearth process (the CLI
        # beside the UI) deleted and re-created the collection.
        if reading and self.server is not None:
            found = self._still_there(self.server, store_name)
            if found is not None:
                return found
        metadata = {"embedder": embedder}
        with self._guarded():
            return self._client.get_or_create_collection(
                store_name,
                embedding_function=None,
                metadata=metadata,
                configuration={"hnsw": {"space": "cosine"}},
            )

    def _still_there(self, server: ChromaServer, store_name: str) -> Any:
        """A server collection about to be read, or None when the server has none of that name and this Hearth added
        nothing to it (it is made then, as for a write). Gone from the server while this Hearth's records list
        passages in it, it is named: made again it would be empty, and every search would find nothing."""
        with self._guarded(), contextlib.suppress(ValueError, LookupError, self._not_found):
            return self._client.get_collection(store_name, embedding_function=None)
        name = self._expected(store_name)
        if name is not None:
            raise ServerCollectionGone(
                f"The collection {name!r} is no longer on the Chroma server {server.shown}: it was deleted there "
                "(by another Hearth, or by hand), with every passage Hearth had added to it.",
                f'Delete it in Hearth (hearth collections "{name}" --delete), then add its files again.',
            )
        return None

    def replace_file(
        self, store_name: str, embedder: str, path: str, chunks: Sequence[Chunk], vectors: np.ndarray
    ) -> None:
        """Make the store hold exactly ``chunks`` for ``path`` (old chunks of that path are removed first)."""
        collection = self._collection(store_name, embedder)
        # On a server, when: another Hearth's reconciliation leaves passages written lately to the Hearth writing
        # them (its record of the file, written last, may be on its way), and removes them once they are old.
        written = {WRITTEN_AT: time.time()} if self.server is not None else {}
        with self._lock, self._guarded():
            collection.delete(where={"path": path})
            for start in range(0, len(chunks), WRITE_BATCH):
                batch = chunks[start : start + WRITE_BATCH]
                collection.upsert(
                    ids=[c.id for c in batch],
                    embeddings=vectors[start : start + len(batch)],
                    documents=[c.text for c in batch],
                    metadatas=[_metadata(path, c) | written for c in batch],
                )

    def remove_file(self, store_name: str, embedder: str, path: str) -> None:
        collection = self._collection(store_name, embedder)
        with self._lock, self._guarded():
            collection.delete(where={"path": path})

    def remove_chunks(self, store_name: str, embedder: str, ids: Sequence[str]) -> None:
        collection = self._collection(store_name, embedder)
        with self._lock, self._guarded():
            for start in range(0, len(ids), WRITE_BATCH):
                collection.delete(ids=list(ids[start : start + WRITE_BATCH]))

    def count(self, store_name: str, embedder: str) -> int:
        collection = self._collection(store_name, embedder, reading=True)
        with self._guarded():
            return int(collection.count())

    def chunks_of(self, store_name: str, embedder: str, path: str) -> list[StoredChunk]:
        collection = self._collection(store_name, embedder, reading=True)
        with self._guarded():
            result = collection.get(where={"path": path}, include=["documents", "metadatas"])
        return sorted(_stored(result["ids"], result["documents"], result["metadatas"]), key=lambda c: c.index)

    def all_chunks(self, store_name: str, embedder: str) -> list[StoredChunk]:
        """Every chunk of a collection (for the keyword index), read in pages."""
        collection = self._collection(store_name, embedder, reading=True)
        chunks: list[StoredChunk] = []
        with self._guarded():
            for offset in range(0, int(collection.count()), READ_PAGE):
                result = collection.get(include=["documents", "metadatas"], limit=READ_PAGE, offset=offset)
                chunks.extend(_stored(result["ids"], result["documents"], result["metadatas"]))
        return chunks

    def pages(self, store_name: str, embedder: str) -> Iterator[ExportedPage]:
        """Every chunk of a collection with its vector, a page at a time (nothing may write to it meanwhile)."""
        collection = self._collection(store_name, embedder, reading=True)
        with self._guarded():
            total = int(collection.count())
        for offset in range(0, total, READ_PAGE):
            with self._guarded():
                got = collection.get(include=["embeddings", "documents", "metadatas"], limit=READ_PAGE, offset=offset)
            yield ExportedPage(
                list(got["ids"]),
                np.asarray(got["embeddings"], dtype=np.float32),
                [str(text) for text in got["documents"]],
                [dict(meta or {}) for meta in got["metadatas"]],
            )

    def add_page(self, store_name: str, embedder: str, page: ExportedPage) -> None:
        """Store a page another store exported, as it was (the same ids: adding it again changes nothing)."""
        collection = self._collection(store_name, embedder)
        for start in range(0, len(page.ids), WRITE_BATCH):
            end = start + WRITE_BATCH
            with self._lock, self._guarded():
                collection.upsert(
                    ids=page.ids[start:end],
                    embeddings=page.vectors[start:end],
                    documents=page.texts[start:end],
                    metadatas=page.metadatas[start:end],
                )

    def chunk_ids_by_path(self, store_name: str, embedder: str) -> dict[str, list[str]]:
        """The ids of a collection's chunks, by the file they came from (metadata only, read in pages)."""
        collection = self._collection(store_name, embedder, reading=True)
        by_path: dict[str, list[str]] = {}
        with self._guarded():
            for offset in range(0, int(collection.count()), READ_PAGE):
                result = collection.get(include=["metadatas"], limit=READ_PAGE, offset=offset)
                for chunk_id, meta in zip(result["ids"], result["metadatas"], strict=True):
                    by_path.setdefault(str((meta or {}).get("path", "")), []).append(chunk_id)
        return by_path

    def written_since(self, store_name: str, embedder: str, since: float) -> set[str]:
        """The files whose passages were written at ``since`` or later (on a server; nothing in the data folder)."""
        if self.server is None:
            return set()
        collection = self._collection(store_name, embedder, reading=True)
        paths: set[str] = set()
        start = 0
        with self._guarded():
            while True:
                result = collection.get(
                    where={WRITTEN_AT: {"$gte": since}}, include=["metadatas"], offset=start, limit=READ_PAGE
                )
                paths.update(str((meta or {}).get("path", "")) for meta in result["metadatas"])
                if len(result["ids"]) < READ_PAGE:
                    return paths
                start += READ_PAGE

    def nearest(self, store_name: str, embedder: str, vector: np.ndarray, limit: int) -> list[StoredChunk]:
        """The ``limit`` chunks closest to ``vector`` (cosine), closest first."""
        return [chunk for chunk, _ in self.nearest_scored(store_name, embedder, vector, limit)]

    def nearest_scored(
        self, store_name: str, embedder: str, vector: np.ndarray, limit: int
    ) -> list[tuple[StoredChunk, float]]:
        """The ``limit`` chunks closest to ``vector``, closest first, each with its cosine similarity."""
        collection = self._collection(store_name, embedder, reading=True)
        with self._guarded():  # Chroma 1.5 answers fewer than ``limit`` (or none) from a smaller collection
            result = collection.query(
                query_embeddings=vector.reshape(1, -1), n_results=limit, include=["documents", "metadatas", "distances"]
            )
        similarity = {i: 1.0 - float(d) for i, d in zip(result["ids"][0], result["distances"][0], strict=True)}
        chunks = _stored(result["ids"][0], result["documents"][0], result["metadatas"][0])
        return [(chunk, similarity[chunk.id]) for chunk in chunks]

    def store_names(self) -> list[str]:
        """The Chroma collections in the folder (one per Hearth collection, named by ``store_name_for``)."""
        with self._guarded():
            return sorted(str(c.name) for c in self._client.list_collections())

    def exercise(self, store_name: str) -> int:
        """Read one collection the way searching does (count, one stored vector, a query with it); its chunk count.
        For checking a store: a damaged vector index fails here (or, in Chroma 1.5, crashes the process)."""
        with self._guarded():
            collection = self._client.get_collection(store_name)
            count = int(collection.count())
            if count:
                first = collection.get(limit=1, include=["embeddings"])
                collection.query(query_embeddings=first["embeddings"], n_results=1, include=[])
        return count

    def drop(self, store_name: str) -> None:
        # Already gone is fine, and so is never made: a collection created empty on the Documents tab has no store
        # until its first file (Chroma 1.5 says NotFoundError; older versions a ValueError).
        with self._lock, self._guarded(), contextlib.suppress(ValueError, LookupError, self._not_found):
            self._client.delete_collection(store_name)


def _nothing_expected(store_name: str) -> str | None:
    return None


def _metadata(path: str, chunk: Chunk) -> dict[str, str | int]:
    meta: dict[str, str | int] = {"path": path, "index": chunk.index}
    if chunk.page is not None:
        meta["page"] = chunk.page
    if chunk.section:
        meta["section"] = chunk.section
    return meta


def _stored(ids: Sequence[str], texts: Sequence[str], metas: Sequence[Any]) -> list[StoredChunk]:
    """Chroma's parallel result lists as chunks. A chunk that another process deleted can still come back from a
    query, with neither text nor metadata (this process's copy of the vector index lags behind): it is left out."""
    chunks = []
    for chunk_id, text, meta in zip(ids, texts, metas, strict=True):
        if meta is None or text is None:
            continue
        page, section = meta.get("page"), meta.get("section")
        chunks.append(
            StoredChunk(
                chunk_id,
                text,
                str(meta["path"]),
                int(page) if page is not None else None,
                str(section) if section else None,
                int(meta["index"]),
            )
        )
    return chunks


def is_rust_panic(exc: BaseException) -> bool:
    """A panic in a Rust extension (pyo3 raises it as ``pyo3_runtime.PanicException``, a module that cannot be
    imported, so the type is recognised by its name and module)."""
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def repair_marker(directory: Path) -> Path:
    """The file that tells the next `hearth ui` to check and repair the vector store in ``directory``."""
    return directory.with_name(f"{directory.name}{REPAIR_MARKER_SUFFIX}")


def _damaged(directory: Path, detail: str) -> DamagedStore:
    """The damage error, after leaving the marker that makes the next start repair the store (checking Chroma
    at every start would cost seconds; this way only a start after damage pays)."""
    with contextlib.suppress(OSError):
        repair_marker(directory).touch()
    return damaged(WHAT, directory, detail, MEANWHILE, repaired_at_start=True)


def check_startup_tables(path: Path) -> None:
    """Check the pages of the tables (and their indexes) that Chroma reads when it opens ``path``: a few small
    ones, about a millisecond. Raise :class:`DamagedStore` if SQLite finds them damaged. A missing file is a new
    store, and fine."""
    if not path.exists():
        return
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return  # Chroma's own open reports what is wrong
    try:
        for table in STARTUP_TABLES:
            try:
                rows = db.execute(f"PRAGMA quick_check({table})").fetchall()  # a fixed list of names
            except sqlite3.DatabaseError as exc:
                if is_damage(exc):
                    raise _damaged(path.parent, f"{path.name}: {exc}") from exc
                continue  # a table this Chroma version does not have: Chroma creates or ignores it
            problem = first_complaint(rows)
            if problem is not None:
                raise _damaged(path.parent, f"{path.name}: {problem}")
    finally:
        db.close()
