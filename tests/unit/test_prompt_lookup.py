"""Prompt-lookup drafts (what followed the last tokens earlier), the draft length chosen from what guesses were kept
and what extra tokens cost on this machine, and the speculative-sampling rule, as pure logic."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from backends.llamacpp.prompt_lookup import (
    EXPLORE_EVERY,
    LONGEST_DRAFT,
    DraftPolicy,
    PromptLookup,
    accept_or_resample,
)

# "the dpkg database lives in /var/lib/dpkg ." as tokens, then an answer that starts copying it
PASSAGE = [10, 11, 12, 13, 14, 15, 16, 17]


def test_the_tokens_that_followed_the_last_ones_earlier_are_the_draft() -> None:
    lookup = PromptLookup.over([1, 2, *PASSAGE, 3, 4])
    lookup.extend([50, 11, 12])  # the answer repeats "dpkg database"
    assert lookup.draft(10) == [13, 14, 15, 16, 17, 3, 4, 50, 11, 12]  # what followed it in the passage, and on
    assert lookup.draft(2) == [13, 14]  # as many as asked for


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


def test_a_draft_is_the_followers_of_the_match_and_the_answer_counts_what_was_kept() -> None:
    lookup = PromptLookup.over(PASSAGE * 2)
    lookup.extend(PASSAGE[:2])
    assert lookup.draft(3) == PASSAGE[2:5]
    lookup.record(3, 2)
    lookup.record(4, 0)
    assert (lookup.drafted, lookup.accepted) == (7, 2)


def _policy(costs: dict[int, float], kept: list[int], proposed: int = LONGEST_DRAFT) -> DraftPolicy:
    """A policy that measured steps of n tokens taking ``costs[n]`` (relative to 1.0 for one) and saw drafts of
    ``proposed`` tokens keep ``kept`` tokens each."""
    policy = DraftPolicy()
    for tokens, cost in costs.items():
        policy.observe_step(tokens, cost)
    for count in kept:
        policy.observe_draft(proposed, count)
    return policy


LAPTOP = {1: 1.0, 2: 1.44, 3: 1.75, 4: 2.12, 5: 2.43, 6: 2.72, 8: 3.24, 12: 3.40, 16: 3.55}  # measured, 2 cores
FLAT = {1: 1.0, 2: 1.02, 4: 1.05, 8: 1.1, 16: 1.2}  # what a GPU or a wide CPU looks like


def test_guesses_kept_half_the_time_pay_a_few_tokens_on_a_laptop_and_many_where_extra_tokens_are_cheap() -> None:
    often = [0, 1, 2, 4, 0, 9, 1, 3, 0, 6] * 5  # Qwen on Debian passages: 2.6 kept of 15 on average
    assert 1 <= _policy(LAPTOP, often).length(LONGEST_DRAFT) <= 3
    assert _policy(FLAT, often).length(LONGEST_DRAFT) >= 8
    assert _policy(FLAT, often).length(2) == 2  # never beyond the room left


def test_guesses_that_are_never_kept_are_not_made_except_a_token_now_and_then() -> None:
    policy = _policy(LAPTOP, [0] * 40)
    chosen = [policy.length(LONGEST_DRAFT) for _ in range(EXPLORE_EVERY * 3)]
    assert chosen.count(1) == 3 and set(chosen) == {0, 1}


def test_costs_between_measured_counts_are_interpolated_and_before_any_the_prior_holds() -> None:
    policy = DraftPolicy()
    assert policy.cost(5) == pytest.approx(1.4)  # 1 + 4 tenths: nothing measured
    policy.observe_step(1, 0.1)
    policy.observe_step(9, 0.5)
    assert policy.cost(5) == pytest.approx(3.0) and policy.cost(9) == pytest.approx(5.0)
    assert policy.cost(11) == pytest.approx(5.2)  # beyond the measured ones: the prior's slope
    policy.observe_step(9, 1.0)
    assert policy.cost(9) == pytest.approx(6.0)  # a running figure: 0.5 moved a fifth of the way to 1.0


def test_a_guess_after_a_miss_says_nothing_about_whether_it_would_be_kept() -> None:
    policy = DraftPolicy()
    policy.observe_draft(5, 1)  # guess 1 kept, guess 2 missed, 3-5 never judged
    assert policy.kept_at_least(1) == pytest.approx(2.2 / 3.0)
    assert policy.kept_at_least(2) == pytest.approx(2.2 / 3.0 * 1.2 / 3.0)
    assert policy.kept_at_least(3) == pytest.approx(2.2 / 3.0 * 1.2 / 3.0 * 0.6)  # the prior alone


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
