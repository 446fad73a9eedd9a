"""How many of a joined passage's first tokens are read again (``GenerationParams.passage_recompute``)."""

from __future__ import annotations

import pytest

from backends.llamacpp.caches.passage_join import recomputed


@pytest.mark.parametrize(
    ("length", "share", "read_again"),
    [(160, 0.0, 0), (160, 0.2, 32), (161, 0.2, 32), (5, 0.5, 2), (7, 0.5, 4), (160, 1.0, 160), (160, 1.5, 160)],
)
def test_a_share_of_the_passage_rounded_and_never_more_than_it(length: int, share: float, read_again: int) -> None:
    assert recomputed(length, share) == read_again


def test_no_share_or_a_negative_one_reads_nothing_again() -> None:
    assert recomputed(160, -0.3) == 0
    assert recomputed(0, 0.2) == 0
