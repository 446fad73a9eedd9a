"""Chunks and their vectors in Chroma's embedded PersistentClient: one Chroma collection per knowledge base,
in the data directory. Chroma never embeds anything itself here (its default embedder would download a model):
vectors always come from Hearth's embedder."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag.chunking import Chunk

WRITE_BATCH = 512


@dataclass(frozen=True)
class StoredChunk:
    id: str
    text: str
    path: str
    page: int | None
    section: str | None
    index: int


class VectorStore:
    def __init__(self, directory: Path) -> None:
        import chromadb
        from chromadb.config import Settings

        self._client = chromadb.PersistentClient(
            path=str(directory), settings=Settings(anonymized_telemetry=False, allow_reset=False)
        )
        self._lock = threading.Lock()

    def _collection(self, store_name: str, embedder: str) -> Any:
        # Looked up each time (about 0.7 ms): a cached handle would go stale if another Hearth process (the CLI
        # beside the UI) deleted and re-created the collection.
        return self._client.get_or_create_collection(
            store_name,
            embedding_function=None,
            metadata={"embedder": embedder},
            configuration={"hnsw": {"space": "cosine"}},
        )

    def replace_file(
        self, store_name: str, embedder: str, path: str, chunks: Sequence[Chunk], vectors: np.ndarray
    ) -> None:
        """Make the store hold exactly ``chunks`` for ``path`` (old chunks of that path are removed first)."""
        collection = self._collection(store_name, embedder)
        with self._lock:
            collection.delete(where={"path": path})
            for start in range(0, len(chunks), WRITE_BATCH):
                batch = chunks[start : start + WRITE_BATCH]
                collection.upsert(
                    ids=[c.id for c in batch],
                    embeddings=vectors[start : start + len(batch)],
                    documents=[c.text for c in batch],
                    metadatas=[_metadata(path, c) for c in batch],
                )

    def remove_file(self, store_name: str, embedder: str, path: str) -> None:
        with self._lock:
            self._collection(store_name, embedder).delete(where={"path": path})

    def count(self, store_name: str, embedder: str) -> int:
        return int(self._collection(store_name, embedder).count())

    def chunks_of(self, store_name: str, embedder: str, path: str) -> list[StoredChunk]:
        result = self._collection(store_name, embedder).get(where={"path": path}, include=["documents", "metadatas"])
        return sorted(_stored(result["ids"], result["documents"], result["metadatas"]), key=lambda c: c.index)

    def all_chunks(self, store_name: str, embedder: str) -> list[StoredChunk]:
        """Every chunk of a collection (for the keyword index), read in pages."""
        collection = self._collection(store_name, embedder)
        chunks: list[StoredChunk] = []
        page = 5000
        for offset in range(0, int(collection.count()), page):
            result = collection.get(include=["documents", "metadatas"], limit=page, offset=offset)
            chunks.extend(_stored(result["ids"], result["documents"], result["metadatas"]))
        return chunks

    def nearest(self, store_name: str, embedder: str, vector: np.ndarray, limit: int) -> list[StoredChunk]:
        """The ``limit`` chunks closest to ``vector`` (cosine), closest first."""
        collection = self._collection(store_name, embedder)
        available = int(collection.count())
        if available == 0:
            return []
        result = collection.query(
            query_embeddings=vector.reshape(1, -1), n_results=min(limit, available), include=["documents", "metadatas"]
        )
        return _stored(result["ids"][0], result["documents"][0], result["metadatas"][0])

    def drop(self, store_name: str) -> None:
        with self._lock, contextlib.suppress(ValueError, LookupError):  # already gone is fine
            self._client.delete_collection(store_name)


def _metadata(path: str, chunk: Chunk) -> dict[str, str | int]:
    meta: dict[str, str | int] = {"path": path, "index": chunk.index}
    if chunk.page is not None:
        meta["page"] = chunk.page
    if chunk.section:
        meta["section"] = chunk.section
    return meta


def _stored(ids: Sequence[str], texts: Sequence[str], metas: Sequence[Any]) -> list[StoredChunk]:
    """Chroma's parallel result lists as chunks."""
    chunks = []
    for chunk_id, text, meta in zip(ids, texts, metas, strict=True):
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
