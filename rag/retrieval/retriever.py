"""Hybrid retrieval: keyword (BM25) and vector (cosine) rankings fused by reciprocal rank, near-duplicates
dropped, then an optional reranker. The keyword index is built from the collection's chunks on first use and
rebuilt when the collection changes. A passage found inside a manual's option entry, after the line that defines
the option, gets that line put in front of it (``rag/reading/entries.py``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from rag.chunking import searchable_text
from rag.manifest import CollectionError, CollectionInfo, Manifest
from rag.reading.entries import entry_head
from rag.retrieval.bm25 import BM25Index, Terms, Vocabulary
from rag.retrieval.embeddings import Embedder
from rag.retrieval.fusion import FusionPolicy, drop_near_duplicates, fuse
from rag.store import StoredChunk, VectorStore

CANDIDATES_PER_RANKING = 40
ENTRY_LOOKBACK = 2  # passages before a found one searched for the option entry it begins inside
# Chosen on the tuning halves of both question sets in bench/data (bench/fusion_tuning.py, 1,261 policies): first
# the policy that falls least behind the better of dense-only and keyword-only search, then the most questions right.
# Keyword ranks weigh 1.5 times vector ranks, a smaller RRF constant lets first places count for more, and a vector
# hit with similarity 0.5 or more, 0.1 ahead of the next, keeps first place. Held-out halves against plain RRF
# (k 60, equal weights), hit@1 / hit@5: Debian docs 36/53 -> 37/52 of 69, four PDF manuals 13/20 -> 15/20 of 24.
DEFAULT_POLICY = FusionPolicy(keyword_weight=1.5, k=10, confident_similarity=0.5, confident_margin=0.1)


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


@dataclass(frozen=True)
class Candidates:
    """What each ranking found for one question, before fusion."""

    keyword: list[StoredChunk]
    vector: list[StoredChunk]
    vector_similarity: list[float]  # cosine similarity of each passage in ``vector``
    exact: list[StoredChunk]
    embed_ms: float = 0.0
    keyword_ms: float = 0.0
    vector_ms: float = 0.0


@dataclass
class _KeywordIndex:
    version: tuple[int, float]
    chunks: list[StoredChunk]
    index: BM25Index
    by_position: dict[tuple[str, int], StoredChunk] = field(default_factory=dict)
    # What a refresh reuses: each indexed file's record (hash, passages) and passages as read, each passage's terms.
    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    by_file: dict[str, list[StoredChunk]] = field(default_factory=dict)
    terms: dict[str, Terms] = field(default_factory=dict)
    vocabulary: Vocabulary = field(default_factory=Vocabulary)

    def __post_init__(self) -> None:
        self.by_position = {(c.path, c.index): c for c in self.chunks}


class Retriever:
    def __init__(
        self,
        manifest: Manifest,
        store: VectorStore,
        embedder: Embedder,
        reranker: Reranker | None = None,
        policy: FusionPolicy = DEFAULT_POLICY,
    ) -> None:
        self.policy = policy
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
                cached = self._refreshed(info, version, cached)
                self._keyword[info.store_name] = cached
            return cached

    def _refreshed(
        self, info: CollectionInfo, version: tuple[int, float], cached: _KeywordIndex | None
    ) -> _KeywordIndex:
        """The keyword index over the passages of the collection's indexed files (the passages of a file whose
        adding was cut short are not among them). After a change, only the files that changed are read from the
        store and only their passages tokenized; the others' terms are reused, and the index is built from the
        terms (at 100,000 passages: 1.19 s against 17.45 s building from the text, medians of three runs in
        bench/data/bm25-build.txt, made by bench/bm25_build.py)."""
        records = {
            path: (record.sha256, record.chunks)
            for path, record in self._manifest.files(info.name).items()
            if record.status == "indexed"
        }
        kept = cached.files if cached is not None else {}
        changed = [path for path, record in records.items() if kept.get(path) != record]
        by_file: dict[str, list[StoredChunk]] = {}
        if cached is None or len(changed) > len(records) // 2:  # most of it: read in pages, not file by file
            for chunk in self._store.all_chunks(info.store_name, info.embedder):
                if chunk.path in records:
                    by_file.setdefault(chunk.path, []).append(chunk)
        else:
            by_file = {path: cached.by_file.get(path, []) for path in records if path not in changed}
            for path in changed:
                by_file[path] = self._store.chunks_of(info.store_name, info.embedder, path)
        vocabulary = cached.vocabulary if cached is not None else Vocabulary()
        reused = cached.terms if cached is not None else {}
        chunks = [chunk for path in sorted(by_file) for chunk in by_file[path]]
        terms = {
            chunk.id: reused.get(chunk.id) or vocabulary.terms(searchable_text(chunk.text, chunk.section))
            for chunk in chunks
        }
        index = BM25Index.from_terms([terms[chunk.id] for chunk in chunks], vocabulary)
        return _KeywordIndex(version, chunks, index, files=records, by_file=by_file, terms=terms, vocabulary=vocabulary)

    def candidates(self, collection: str, query: str) -> Candidates:
        """The three rankings for ``query`` before fusion, with the time each took."""
        info = self._manifest.get(collection)
        if info.embedder != self._embedder.name:  # its vectors and the question's would not be comparable
            raise CollectionError(
                f"Collection {info.name!r} was built with the embedder {info.embedder}; this Hearth embeds with "
                f"{self._embedder.name}, and a question embedded by one model cannot be compared with passages "
                "embedded by another.",
                "Search it from a Hearth with that embedder, or delete the collection and add its documents again.",
            )
        started = time.perf_counter()
        vector = self._embedder.embed([query])[0]
        embedded = time.perf_counter()
        keyword = self.keyword_index(info)  # built on first use: that cost is part of this search's time
        keyword_hits = [keyword.chunks[i] for i, _ in keyword.index.search(query, CANDIDATES_PER_RANKING)]
        # Passages holding every number/code/identifier of the question come first (rag.retrieval.fusion explains why).
        exact_hits = [keyword.chunks[i] for i in keyword.index.exact_matches(query)]
        keyword_done = time.perf_counter()
        scored = self._store.nearest_scored(info.store_name, info.embedder, vector, CANDIDATES_PER_RANKING)
        # Only passages of recorded files: one whose record is not yet written (being added, here or by another
        # Hearth on a shared server, or left by an add cut short) is not part of the collection yet.
        scored = [(chunk, similarity) for chunk, similarity in scored if chunk.id in keyword.terms]
        vector_done = time.perf_counter()
        return Candidates(
            keyword_hits,
            [chunk for chunk, _ in scored],
            [similarity for _, similarity in scored],
            exact_hits,
            embed_ms=(embedded - started) * 1000,
            keyword_ms=(keyword_done - embedded) * 1000,
            vector_ms=(vector_done - keyword_done) * 1000,
        )

    def search(self, collection: str, query: str, top_k: int = 5) -> SearchResult:
        found = self.candidates(collection, query)
        fusing = time.perf_counter()
        passages = self.rank(found, self.policy)
        wanted = top_k * 3 if self._reranker is not None else top_k
        passages = drop_near_duplicates(passages, lambda p: p.chunk.text, limit=wanted)
        if self._reranker is not None:
            passages = self._reranker.rerank(query, passages)
        chosen = self.with_entry_heads(collection, passages[:top_k])
        fusion_ms = (time.perf_counter() - fusing) * 1000
        return SearchResult(
            chosen,
            found.embed_ms,
            found.keyword_ms + found.vector_ms + fusion_ms,
            keyword_ms=found.keyword_ms,
            vector_ms=found.vector_ms,
            fusion_ms=fusion_ms,
        )

    def with_entry_heads(self, collection: str, passages: Sequence[Passage]) -> list[Passage]:
        """``passages``, each that begins inside an option entry with the entry's defining sentence in front."""
        known = self.keyword_index(self._manifest.get(collection)).by_position
        extended = []
        for passage in passages:
            chunk = passage.chunk
            before = [known.get((chunk.path, chunk.index - back)) for back in range(ENTRY_LOOKBACK, 0, -1)]
            head = entry_head([c.text for c in before if c is not None], chunk.text)
            if head is not None:
                passage = replace(passage, chunk=replace(chunk, text=f"{head} …\n{chunk.text}"))
            extended.append(passage)
        return extended

    @staticmethod
    def rank(found: Candidates, policy: FusionPolicy) -> list[Passage]:
        """Every candidate passage, best first, by ``policy`` (near-duplicates not yet removed)."""
        by_id = {c.id: c for c in (*found.keyword, *found.vector, *found.exact)}
        keyword_rank = {c.id: rank for rank, c in enumerate(found.keyword, start=1)}
        vector_rank = {c.id: rank for rank, c in enumerate(found.vector, start=1)}
        fused = fuse(
            [c.id for c in found.keyword],
            [c.id for c in found.vector],
            found.vector_similarity,
            [c.id for c in found.exact],
            policy,
        )
        return [
            Passage(by_id[chunk_id], score, keyword_rank.get(chunk_id), vector_rank.get(chunk_id))
            for chunk_id, score in fused
        ]
