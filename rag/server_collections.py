"""Collections in two places (issue 40): the data folder's, and a Chroma server's, seen as one manifest and one
vector store, so that ingestion, search and every front end work on either without knowing which.

With a server configured, new collections are made on it; those already in the data folder stay there and keep
working, also while the server cannot be reached (its collections then fail alone, naming it). A collection name
is one collection: one in the data folder is not made again on the server.

What this Hearth knows of its files on a server (each file's hash, passages and status) is kept in the data folder,
one database per server (``DataPaths.chroma_servers_dir``); and each collection it makes on the server is marked
with this data folder's id, so another Hearth pointed at the same server neither writes into it nor deletes it
(``VectorStore.on_server``). Sharing one collection between Hearths needs that state on the server itself: the
next step of issue 40.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from rag.chroma_server import ChromaServer
from rag.chunking import Chunk
from rag.manifest import CollectionError, CollectionInfo, FileRecord, Manifest, normalize_name
from rag.store import StoredChunk, VectorStore
from rag.writelock import WriteLock

OWNER_FILE = "owner"


def server_manifest_path(folder: Path, server: ChromaServer) -> Path:
    """The database of what this Hearth knows of its collections on ``server`` (by its scheme, host and port)."""
    digest = hashlib.sha256(server.shown.encode()).hexdigest()[:16]
    return folder / f"{digest}.db"


def owner_id(folder: Path) -> str:
    """This data folder's id on Chroma servers: made once, at random, kept in ``folder`` (owner-only)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / OWNER_FILE
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    made = secrets.token_hex(16)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(made + "\n")
    return made


class CombinedManifest(Manifest):
    """The data folder's manifest and the server's, answering as one (a :class:`Manifest` to everything that uses
    one). A collection's calls go to the part that holds it; new collections go to the server."""

    def __init__(self, local: Manifest, server: Manifest, shown: str) -> None:  # no database of its own
        self._local = local
        self._server = server
        self._shown = shown

    def _on_server(self, info: CollectionInfo) -> CollectionInfo:
        return replace(info, server=self._shown)

    def _part(self, collection: str) -> Manifest:
        """The manifest holding the collection called exactly ``collection`` (the data folder's first)."""
        if any(info.name == collection for info in self._local.collections()):
            return self._local
        if any(info.name == collection for info in self._server.collections()):
            return self._server
        return self._local

    def server_store_names(self) -> set[str]:
        return {info.store_name for info in self._server.collections()}

    def collections(self) -> list[CollectionInfo]:
        both = [*self._local.collections(), *(self._on_server(info) for info in self._server.collections())]
        return sorted(both, key=lambda info: info.name.casefold())

    def find(self, name: str) -> CollectionInfo | None:
        here = self._local.find(name)
        if here is not None:
            return here
        there = self._server.find(name)
        return self._on_server(there) if there is not None else None

    def create(self, name: str, embedder: str) -> CollectionInfo:
        name = normalize_name(name)
        existing = self._local.find(name)
        if existing is not None:
            raise CollectionError(
                f"There is already a collection called {existing.name!r} in the data folder.",
                "Add to that one, or give the new collection on the Chroma server another name.",
            )
        return self._on_server(self._server.create(name, embedder))

    def delete_collection(self, name: str) -> None:
        self._part(name).delete_collection(name)

    def files(self, collection: str) -> dict[str, FileRecord]:
        return self._part(collection).files(collection)

    def record(self, collection: str, record: FileRecord) -> None:
        self._part(collection).record(collection, record)

    def forget(self, collection: str, path: str) -> None:
        self._part(collection).forget(collection, path)

    def indexed_chunks(self, collection: str) -> int:
        return self._part(collection).indexed_chunks(collection)

    @property
    def write_lock(self) -> WriteLock:
        return self._local.write_lock

    def needs_indexing(self, collection: str, paths: Iterable[str]) -> None:
        self._part(collection).needs_indexing(collection, paths)

    def touch(self, collection: str) -> None:
        self._part(collection).touch(collection)

    def version(self, collection: str) -> tuple[int, float]:
        return self._part(collection).version(collection)

    def close(self) -> None:
        self._local.close()
        self._server.close()


class RoutedStore(VectorStore):
    """The data folder's vector store and the server's, answering as one (a :class:`VectorStore` to everything
    that uses one): each call goes where its collection lives. The server is connected on first use, and again
    after a failure, so an unreachable server fails only its own collections' calls."""

    def __init__(
        self, local: VectorStore, connect: Callable[[], VectorStore], on_server: Callable[[str], bool]
    ) -> None:  # no Chroma client of its own
        self.directory = local.directory
        self.server = None
        self._local = local
        self._connect = connect
        self._on_server = on_server
        self._connected: VectorStore | None = None
        self._connecting = threading.Lock()

    def _for(self, store_name: str) -> VectorStore:
        if not self._on_server(store_name):
            return self._local
        with self._connecting:
            if self._connected is None:
                self._connected = self._connect()
            return self._connected

    def replace_file(
        self, store_name: str, embedder: str, path: str, chunks: Sequence[Chunk], vectors: np.ndarray
    ) -> None:
        self._for(store_name).replace_file(store_name, embedder, path, chunks, vectors)

    def remove_file(self, store_name: str, embedder: str, path: str) -> None:
        self._for(store_name).remove_file(store_name, embedder, path)

    def remove_chunks(self, store_name: str, embedder: str, ids: Sequence[str]) -> None:
        self._for(store_name).remove_chunks(store_name, embedder, ids)

    def count(self, store_name: str, embedder: str) -> int:
        return self._for(store_name).count(store_name, embedder)

    def chunks_of(self, store_name: str, embedder: str, path: str) -> list[StoredChunk]:
        return self._for(store_name).chunks_of(store_name, embedder, path)

    def all_chunks(self, store_name: str, embedder: str) -> list[StoredChunk]:
        return self._for(store_name).all_chunks(store_name, embedder)

    def chunk_ids_by_path(self, store_name: str, embedder: str) -> dict[str, list[str]]:
        return self._for(store_name).chunk_ids_by_path(store_name, embedder)

    def nearest_scored(
        self, store_name: str, embedder: str, vector: np.ndarray, limit: int
    ) -> list[tuple[StoredChunk, float]]:
        return self._for(store_name).nearest_scored(store_name, embedder, vector, limit)

    def store_names(self) -> list[str]:
        """The data folder's (what checking and repairing the folder reads)."""
        return self._local.store_names()

    def exercise(self, store_name: str) -> int:
        return self._for(store_name).exercise(store_name)

    def drop(self, store_name: str) -> None:
        self._for(store_name).drop(store_name)
