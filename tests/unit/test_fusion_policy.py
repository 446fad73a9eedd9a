"""The fusion policy: weights per ranking, and a confident vector hit that keyword overlap cannot push down."""

import pytest

from rag.retrieval.fusion import FusionPolicy, fuse

KEYWORD = ["k1", "k2", "k3", "v1"]
VECTOR = ["v1", "k1", "v2", "v3"]


def order(pairs: list[tuple[str, float]]) -> list[str]:
    return [item for item, _ in pairs]


def test_without_a_confidence_rule_passages_both_rankings_like_come_first() -> None:
    fused = fuse(KEYWORD, VECTOR, [0.9, 0.5, 0.4, 0.3], [], FusionPolicy())
    assert order(fused)[:2] == ["k1", "v1"]  # k1: ranks 1 and 2; v1: ranks 4 and 1


@pytest.mark.parametrize(
    ("similarities", "policy", "first"),
    [
        ([0.72, 0.50, 0.4, 0.3], FusionPolicy(confident_similarity=0.6, confident_margin=0.1), "v1"),
        ([0.72, 0.68, 0.4, 0.3], FusionPolicy(confident_similarity=0.6, confident_margin=0.1), "k1"),  # close call
        ([0.55, 0.30, 0.2, 0.1], FusionPolicy(confident_similarity=0.6, confident_margin=0.1), "k1"),  # too low
        ([0.95, 0.10, 0.1, 0.1], FusionPolicy(), "k1"),  # no rule: never pinned
    ],
)
def test_a_confident_vector_hit_keeps_first_place(similarities: list[float], policy: FusionPolicy, first: str) -> None:
    assert order(fuse(KEYWORD, VECTOR, similarities, [], policy))[0] == first


def test_an_exact_term_passage_still_comes_before_a_confident_vector_hit() -> None:
    policy = FusionPolicy(confident_similarity=0.6, confident_margin=0.1)
    fused = order(fuse(KEYWORD, VECTOR, [0.9, 0.5, 0.4, 0.3], ["k3"], policy))
    assert fused[:2] == ["k3", "v1"]
    assert sorted(fused) == sorted({*KEYWORD, *VECTOR})  # nothing lost or repeated


def test_weights_move_a_ranking_up() -> None:
    keyword_first = order(fuse(["a"], ["b"], [0.5], [], FusionPolicy(keyword_weight=1.5)))
    vector_first = order(fuse(["a"], ["b"], [0.5], [], FusionPolicy(vector_weight=1.5)))
    assert keyword_first == ["a", "b"] and vector_first == ["b", "a"]


def test_a_lone_vector_hit_is_judged_against_nothing() -> None:
    policy = FusionPolicy(confident_similarity=0.6, confident_margin=0.1)
    assert policy.confident([0.65]) and not policy.confident([]) and not policy.confident([0.59])
