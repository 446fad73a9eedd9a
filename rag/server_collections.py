"""Collections in two places: the data folder's, and a Chroma server's, seen as one manifest and one
vector store, so that ingestion, search and every front end work on either without knowing which.

With a server configured, new collections are made on it; those already in the data folder stay there and keep
working, also while the server cannot be reached (its collections then fail alone, naming it). A collection name
is one collection: one in the data folder is not made again on the server.

What Hearth knows of the files in a server's collections (each file's hash, passages and status) is kept on the
server (rag/server_ledger.py), so every Hearth pointed at it shares its collections; the data folder keeps a mirror
of it, one database per server (``DataPaths.chroma_servers_dir``), for listing them while the server is away.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from rag.chroma_server import ChromaServer
from rag.chunking import Chunk
from rag.manifest import CollectionError, CollectionInfo, FileRecord, Manifest, normalize_name
from rag.store import ExportedPage, StoredChunk, VectorStore
from rag.writelock import WriteLock

SERVER_PREFIX = "hs"  # a server collection's Chroma name begins "hs-" (the data folder's "kb-"): where calls go


def on_server(store_name: str) -> bool:
    """Whether the Chroma collection ``store_name`` is one of a server's (its name says: ``SERVER_PREFIX``)."""
    return store_name.startswith(f"{SERVER_PREFIX}-")


def server_manifest_path(folder: Path, server: ChromaServer) -> Path:
    """The database of what this Hearth knows of its collections on ``server`` (by its scheme, host and port)."""
    digest = hashlib.sha256(server.shown.encode()).hexdigest()[:16]
    return folder / f"{digest}.db"


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

    def collections(self) -> list[CollectionInfo]:
        both = [*self._local.collections(), *(self._on_server(info) for info in self._server.collections())]
        return sorted(both, key=lambda info: info.name.casefold())

    def find(self, name: str) -> CollectionInfo | None:
        here = self._local.find(name)
        if here is not None:
            return here
        there = self._server.find(name)
        return self._on_server(there) if there is not None else None

    def held(self, name: str, on_server: bool) -> CollectionInfo | None:
        """The collection called ``name`` in one place (the server's, or the data folder's), wherever the other
        place has one too."""
        if on_server:
            found = self._server.find(name)
            return self._on_server(found) if found is not None else None
        return self._local.find(name)

    def create_in(self, name: str, embedder: str, on_server: bool) -> CollectionInfo:
        """A new collection in one place (a copy of the other place's), refused if that place has the name."""
        held = self.held(name, on_server)
        if held is not None:
            where = f"on the Chroma server {self._shown}" if on_server else "in the data folder"
            raise CollectionError(
                f"There is already a collection called {held.name!r} {where}.",
                "Delete that one first, or keep the one you have.",
            )
        made = self._server.create(name, embedder) if on_server else self._local.create(name, embedder)
        return self._on_server(made) if on_server else made

    def files_held(self, name: str, on_server: bool) -> dict[str, FileRecord]:
        """The files' records of the collection called exactly ``name`` in one place."""
        return (self._server if on_server else self._local).files(name)

    def record_all(self, name: str, records: Iterable[FileRecord], on_server: bool) -> None:
        part = self._server if on_server else self._local
        for record in records:
            part.record(name, record)

    def delete_held(self, name: str, on_server: bool) -> None:
        (self._server if on_server else self._local).delete_collection(name)

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

    def __init__(self, local: VectorStore, connect: Callable[[], VectorStore]) -> None:  # no Chroma client of its own
        self.directory = local.directory
        self.server = None
        self._local = local
        self._connect = connect
        self._connected: VectorStore | None = None
        self._connecting = threading.Lock()

    def _for(self, store_name: str) -> VectorStore:
        if not on_server(store_name):
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

    def written_since(self, store_name: str, embedder: str, since: float) -> set[str]:
        return self._for(store_name).written_since(store_name, embedder, since)

    def nearest_scored(
        self, store_name: str, embedder: str, vector: np.ndarray, limit: int
    ) -> list[tuple[StoredChunk, float]]:
        return self._for(store_name).nearest_scored(store_name, embedder, vector, limit)

    def pages(self, store_name: str, embedder: str) -> Iterator[ExportedPage]:
        return self._for(store_name).pages(store_name, embedder)

    def add_page(self, store_name: str, embedder: str, page: ExportedPage) -> None:
        self._for(store_name).add_page(store_name, embedder, page)

    def store_names(self) -> list[str]:
        """The data folder's (what checking and repairing the folder reads)."""
        return self._local.store_names()

    def exercise(self, store_name: str) -> int:
        return self._for(store_name).exercise(store_name)

    def drop(self, store_name: str) -> None:
        self._for(store_name).drop(store_name)
