"""Prompt-lookup drafts (what followed the last tokens earlier), the draft length that adapts to what was kept, and
the speculative-sampling rule, as pure logic."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from backends.prompt_lookup import (
    FIRST_LENGTH,
    LONGEST_DRAFT,
    PAUSE_AFTER_MISSES,
    PAUSE_TOKENS,
    PromptLookup,
    accept_or_resample,
)

# "the dpkg database lives in /var/lib/dpkg ." as tokens, then an answer that starts copying it
PASSAGE = [10, 11, 12, 13, 14, 15, 16, 17]


def test_the_tokens_that_followed_the_last_ones_earlier_are_the_draft() -> None:
    lookup = PromptLookup.over([1, 2, *PASSAGE, 3, 4])
    lookup.extend([50, 11, 12])  # the answer repeats "dpkg database"
    assert lookup.draft(10) == [13, 14, 15, 16]  # what followed it in the passage, at the first length
    assert lookup.draft(2) == [13, 14]  # never more than the room left


def test_the_longest_run_wins_and_the_latest_occurrence_of_it() -> None:
    lookup = PromptLookup.over([7, 8, 9, 1, 8, 9, 2, 7, 8, 9, 3])
    lookup.extend([7, 8, 9])
    assert lookup.draft(1) == [3]  # "7 8 9" last followed by 3 (not "8 9" -> the other ones)
    lookup = PromptLookup.over([5, 8, 9, 1, 6, 8, 9, 2])
    lookup.extend([4, 8, 9])
    assert lookup.draft(1) == [2]  # no three-token match: the latest "8 9"


def test_a_single_token_or_no_match_drafts_nothing() -> None:
    lookup = PromptLookup.over(PASSAGE)
    lookup.extend([99, 12])  # only the last token matches: too weak a clue
    assert lookup.draft(10) == []
    assert PromptLookup().draft(10) == [] and PromptLookup.over([1]).draft(10) == []
    assert PromptLookup.over([1, 2, 1, 2]).draft(0) == []


def test_the_draft_grows_while_kept_shrinks_when_not_and_rests_after_misses() -> None:
    lookup = PromptLookup.over(PASSAGE * 4)
    lookup.extend(PASSAGE[:3])
    assert lookup.length == FIRST_LENGTH
    lookup.record(4, 4)
    assert lookup.length == FIRST_LENGTH + 2
    for _ in range(10):
        lookup.record(lookup.length, lookup.length)
    assert lookup.length == LONGEST_DRAFT
    lookup.record(12, 3)
    assert lookup.length == 4  # one more than were kept
    assert (lookup.drafted, lookup.accepted) == (4 + 6 + 8 + 10 + 12 * 7 + 12, 4 + 6 + 8 + 10 + 12 * 7 + 3)
    for _ in range(PAUSE_AFTER_MISSES):
        assert lookup.draft(10)
        lookup.record(1, 0)
    assert lookup.draft(10) == []  # resting
    lookup.extend(PASSAGE[3:] + PASSAGE[:3] + PASSAGE[3:])
    assert lookup.draft(10) == [] and len(PASSAGE[3:] + PASSAGE[:3] + PASSAGE[3:]) < PAUSE_TOKENS
    lookup.extend([*PASSAGE, *PASSAGE][: PAUSE_TOKENS - 13])
    assert lookup.draft(10), "drafting resumes after the rest"
    lookup.record(0, 0)  # nothing proposed: nothing learnt
    assert lookup.length == 1


@pytest.mark.parametrize(
    ("target", "draft"),
    [
        ([0.5, 0.3, 0.2], [1.0, 0.0, 0.0]),  # a point-mass guess, as prompt lookup makes
        ([0.1, 0.6, 0.3], [0.7, 0.2, 0.1]),  # a draft model that is wrong about most of it
        ([0.25, 0.25, 0.5], [0.25, 0.25, 0.5]),  # a perfect draft: every guess kept
    ],
)
def test_the_rule_gives_the_target_distribution_whatever_the_draft(target: list[float], draft: list[float]) -> None:
    rng = random.Random(7)
    draws = 40_000
    seen: Counter[int] = Counter()
    kept = 0
    for _ in range(draws):
        guess = rng.choices(range(len(draft)), weights=draft)[0]
        token, accepted = accept_or_resample(target, draft, guess, rng)
        seen[token] += 1
        kept += accepted
    for token, share in enumerate(target):
        assert seen[token] / draws == pytest.approx(share, abs=0.01)
    expected_kept = sum(min(p, q) for p, q in zip(target, draft, strict=True))  # the rule's acceptance rate
    assert kept / draws == pytest.approx(expected_kept, abs=0.01)


def test_with_a_point_mass_guess_the_rule_is_draw_and_compare() -> None:
    """Keeping the guess with probability p(guess), else drawing from p without it: what the engine does by drawing
    from its own sampler chain and keeping the guess when the draw equals it."""
    target, guess = [0.2, 0.5, 0.3], 1
    point_mass = [0.0, 1.0, 0.0]
    rng = random.Random(3)
    outcomes = Counter(accept_or_resample(target, point_mass, guess, rng) for _ in range(40_000))
    assert outcomes[(1, True)] / 40_000 == pytest.approx(0.5, abs=0.01)
    assert outcomes[(1, False)] == 0  # a rejected guess is never drawn again
    assert outcomes[(0, False)] / 40_000 == pytest.approx(0.2, abs=0.01)
    assert outcomes[(2, False)] / 40_000 == pytest.approx(0.3, abs=0.01)
