"""Hybrid retrieval: keyword (BM25) and vector (cosine) rankings fused by reciprocal rank, near-duplicates
dropped, then an optional reranker. The keyword index is built from the collection's chunks on first use and
rebuilt when the collection changes."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rag.bm25 import BM25Index
from rag.chunking import searchable_text
from rag.embeddings import Embedder
from rag.fusion import EXACT_WEIGHT, drop_near_duplicates, reciprocal_rank_fusion
from rag.manifest import CollectionInfo, Manifest
from rag.store import StoredChunk, VectorStore

CANDIDATES_PER_RANKING = 40


@dataclass(frozen=True)
class Passage:
    chunk: StoredChunk
    score: float
    keyword_rank: int | None
    vector_rank: int | None


class Reranker(Protocol):
    def rerank(self, query: str, passages: Sequence[Passage]) -> list[Passage]: ...


@dataclass(frozen=True)
class SearchResult:
    """The passages and where the time went; ``search_ms`` includes building the keyword index on first use."""

    passages: list[Passage]
    embed_ms: float
    search_ms: float
    # Where search_ms went: the keyword ranking (and its exact terms), the vector ranking, fusion and what follows.
    keyword_ms: float = 0.0
    vector_ms: float = 0.0
    fusion_ms: float = 0.0


@dataclass
class _KeywordIndex:
    version: tuple[int, float]
    chunks: list[StoredChunk]
    index: BM25Index


class Retriever:
    def __init__(
        self, manifest: Manifest, store: VectorStore, embedder: Embedder, reranker: Reranker | None = None
    ) -> None:
        self._manifest = manifest
        self._store = store
        self._embedder = embedder
        self._reranker = reranker
        self._keyword: dict[str, _KeywordIndex] = {}
        self._lock = threading.Lock()

    def keyword_index(self, info: CollectionInfo) -> _KeywordIndex:
        version = self._manifest.version(info.name)
        with self._lock:
            cached = self._keyword.get(info.store_name)
            if cached is None or cached.version != version:
                chunks = self._store.all_chunks(info.store_name, info.embedder)
                cached = _KeywordIndex(version, chunks, BM25Index([searchable_text(c.text, c.section) for c in chunks]))
                self._keyword[info.store_name] = cached
            return cached

    def search(self, collection: str, query: str, top_k: int = 5) -> SearchResult:
        info = self._manifest.get(collection)
        started = time.perf_counter()
        vector = self._embedder.embed([query])[0]
        embedded = time.perf_counter()
        keyword = self.keyword_index(info)  # built on first use: that cost is part of this search's time
        keyword_hits = [keyword.chunks[i] for i, _ in keyword.index.search(query, CANDIDATES_PER_RANKING)]
        # Passages holding every number/code/identifier of the question come first (rag.fusion explains why).
        exact_hits = [keyword.chunks[i] for i in keyword.index.exact_matches(query)]
        keyword_done = time.perf_counter()
        vector_hits = self._store.nearest(info.store_name, info.embedder, vector, CANDIDATES_PER_RANKING)
        vector_done = time.perf_counter()
        by_id = {c.id: c for c in (*keyword_hits, *vector_hits, *exact_hits)}
        keyword_rank = {c.id: rank for rank, c in enumerate(keyword_hits, start=1)}
        vector_rank = {c.id: rank for rank, c in enumerate(vector_hits, start=1)}
        fused = reciprocal_rank_fusion(
            [[c.id for c in keyword_hits], [c.id for c in vector_hits], [c.id for c in exact_hits]],
            weights=(1.0, 1.0, EXACT_WEIGHT),
        )
        passages = [
            Passage(by_id[chunk_id], score, keyword_rank.get(chunk_id), vector_rank.get(chunk_id))
            for chunk_id, score in fused
        ]
        wanted = top_k * 3 if self._reranker is not None else top_k
        passages = drop_near_duplicates(passages, lambda p: p.chunk.text, limit=wanted)
        if self._reranker is not None:
            passages = self._reranker.rerank(query, passages)
        done = time.perf_counter()
        return SearchResult(
            passages[:top_k],
            (embedded - started) * 1000,
            (done - embedded) * 1000,
            keyword_ms=(keyword_done - embedded) * 1000,
            vector_ms=(vector_done - keyword_done) * 1000,
            fusion_ms=(done - vector_done) * 1000,
        )
