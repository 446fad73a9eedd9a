"""Pure pieces of hybrid retrieval: reciprocal rank fusion and near-duplicate removal.

Plain rank fusion lets the vector ranking drown an exact keyword hit: asked "What is the codename of Ubuntu 6.06
LTS?", BM25 ranked the 6.06 row first, but the vector ranking put it 27th (a release table's rows all look alike
to an embedding model), and five rows that both rankings liked moderately came first. So the passages that hold
every exact term of the question (a number, a code, an identifier: :meth:`rag.retrieval.bm25.BM25Index.exact_matches`)
form a third ranking, weighted so that such a passage comes before any passage without them.

The opposite failure: a passage the embedding model is sure of (high cosine similarity, well ahead of its second
choice) can be pushed down by passages that merely share words with the question. :class:`FusionPolicy` says when
the vector ranking's first passage is *confident*, and such a passage keeps first place after any exact-term
passage. Its figures were chosen on the tuning half of the question sets in ``bench/data`` (``bench/fusion_tuning.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from rag.retrieval.bm25 import tokenize

RRF_K = 60
# Weight of the exact-match ranking: its first place (EXACT_WEIGHT / 61) outweighs first place in both of the
# other rankings together (2 / 61).
EXACT_WEIGHT = 3.0
NEAR_DUPLICATE_JACCARD = 0.85

T = TypeVar("T")


@dataclass(frozen=True)
class FusionPolicy:
    """How the keyword, vector and exact-term rankings become one."""

    keyword_weight: float = 1.0
    vector_weight: float = 1.0
    exact_weight: float = EXACT_WEIGHT
    k: int = RRF_K
    # The vector ranking's first passage is confident when its cosine similarity is at least this (None: never)...
    confident_similarity: float | None = None
    # ...and it is at least this far ahead of the vector ranking's second passage.
    confident_margin: float = 0.0

    def confident(self, similarities: Sequence[float]) -> bool:
        if self.confident_similarity is None or not similarities:
            return False
        runner_up = similarities[1] if len(similarities) > 1 else -1.0
        return similarities[0] >= self.confident_similarity and similarities[0] - runner_up >= self.confident_margin


def fuse(
    keyword: Sequence[str],
    vector: Sequence[str],
    vector_similarity: Sequence[float],
    exact: Sequence[str],
    policy: FusionPolicy,
) -> list[tuple[str, float]]:
    """The ids of the three rankings (best first) in fused order, with their fused scores. ``vector_similarity``
    holds the cosine similarity of each id in ``vector``."""
    fused = reciprocal_rank_fusion(
        [keyword, vector, exact], k=policy.k, weights=(policy.keyword_weight, policy.vector_weight, policy.exact_weight)
    )
    if not vector or not policy.confident(vector_similarity):
        return fused
    top = vector[0]
    exact_ids = set(exact)
    rest = [pair for pair in fused if pair[0] != top]
    place = next((i for i, (item, _) in enumerate(rest) if item not in exact_ids), len(rest))
    score = dict(fused)[top]
    return [*rest[:place], (top, score), *rest[place:]]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """Each ranking lists ids best first; an id scores sum(weight / (k + rank)) over the rankings it appears in
    (every weight 1 unless ``weights`` gives one per ranking)."""
    weights = [1.0] * len(rankings) if weights is None else weights
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = tokenize(text)
    if len(words) < 3:
        return frozenset({tuple(words)})
    return frozenset(tuple(words[i : i + 3]) for i in range(len(words) - 2))


def jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def drop_near_duplicates(
    items: Sequence[T],
    text_of: Callable[[T], str],
    threshold: float = NEAR_DUPLICATE_JACCARD,
    limit: int | None = None,
) -> list[T]:
    """Keep items in order, skipping any whose word 3-shingles overlap a kept one by ``threshold`` or more;
    stop once ``limit`` are kept (the rest would be cut anyway, and each check costs more as the list grows)."""
    kept: list[T] = []
    kept_shingles: list[frozenset[tuple[str, ...]]] = []
    for item in items:
        if limit is not None and len(kept) >= limit:
            break
        shingles = _shingles(text_of(item))
        if any(jaccard(shingles, other) >= threshold for other in kept_shingles):
            continue
        kept.append(item)
        kept_shingles.append(shingles)
    return kept
