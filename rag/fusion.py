"""Pure pieces of hybrid retrieval: reciprocal rank fusion and near-duplicate removal.

Plain rank fusion lets the vector ranking drown an exact keyword hit: asked "What is the codename of Ubuntu 6.06
LTS?", BM25 ranked the 6.06 row first, but the vector ranking put it 27th (a release table's rows all look alike
to an embedding model), and five rows that both rankings liked moderately came first. So the passages that hold
every exact term of the question (a number, a code, an identifier: :meth:`rag.bm25.BM25Index.exact_matches`) form
a third ranking, weighted so that such a passage comes before any passage without them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from rag.bm25 import tokenize

RRF_K = 60
# Weight of the exact-match ranking: its first place (EXACT_WEIGHT / 61) outweighs first place in both of the
# other rankings together (2 / 61).
EXACT_WEIGHT = 3.0
NEAR_DUPLICATE_JACCARD = 0.85

T = TypeVar("T")


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
