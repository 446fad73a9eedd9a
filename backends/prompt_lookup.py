"""Prompt-lookup decoding, the pure part: drafts of the next tokens found by matching the answer's last few tokens
against what came before (the prompt with its passages, and the answer so far), and how long a draft to try.

An answer from documents copies phrases from its passages; when its last two or three tokens occurred earlier, the
tokens that followed them there are a good guess at what comes next. The engine evaluates the guess in the same
``llama_decode`` as the answer's next token and keeps the longest prefix the model itself would have chosen
(``backends/llamacpp_batch.py``), so one step can write several tokens for about the cost of one: on a CPU writing
a token is bound by reading the weights, which the extra positions share.

Accepting a draft. A draft here is a single guessed token per position (a point mass: q(d) = 1). The standard
speculative-sampling rule accepts a guess d with probability min(1, p(d) / q(d)) and, on a rejection, draws from
the residual max(0, p - q), renormalised (:func:`accept_or_resample`). With a point mass that is: accept with
probability p(d); else draw from p without d. Drawing t from p and keeping d exactly when t == d does the same, so
the engine passes each position through the answer's own sampler chain (its penalties, top-k/p, temperature and
seeded draw) and compares: at temperature 0 a guess is kept only where it is the greedy choice, and a seeded answer
makes the same draws it would without lookup.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

LONGEST_NGRAM = 3  # the longest run of last tokens matched (longer matches are tried first)
SHORTEST_NGRAM = 2  # one token matches too often by chance: its guesses are mostly wrong
FIRST_LENGTH = 4  # tokens guessed at first
LONGEST_DRAFT = 12
PAUSE_AFTER_MISSES = 4  # drafts in a row with no token kept...
PAUSE_TOKENS = 16  # ...and drafting rests this many tokens (an answer that copies nothing pays almost nothing)


@dataclass
class PromptLookup:
    """One answer's lookup: the tokens so far (prompt, then answer), where each run of 2 or 3 tokens was last
    followed by something, and the draft length, which grows while guesses are kept and shrinks when they are not.
    Not thread-safe: the engine's scheduler thread alone uses it."""

    history: list[int] = field(default_factory=list)
    length: int = FIRST_LENGTH
    drafted: int = 0  # tokens guessed over the whole answer
    accepted: int = 0  # of them, the ones kept
    _follows: dict[tuple[int, ...], int] = field(default_factory=dict)  # a run -> the position after its latest
    _misses: int = 0
    _resting: int = 0

    @classmethod
    def over(cls, prompt: Sequence[int]) -> PromptLookup:
        lookup = cls()
        lookup.extend(prompt)
        return lookup

    def extend(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            self.append(token)

    def append(self, token: int) -> None:
        """One more token of the prompt or the answer. The runs that end just before it now have a follower."""
        history = self.history
        end = len(history)
        for n in range(SHORTEST_NGRAM, LONGEST_NGRAM + 1):
            if end >= n:
                self._follows[tuple(history[end - n : end])] = end
        history.append(token)
        if self._resting:
            self._resting -= 1

    def draft(self, most: int) -> list[int]:
        """Up to ``min(most, length)`` tokens that followed the latest earlier occurrence of the longest matching
        run of last tokens; none while resting after misses, or when nothing matches."""
        limit = min(most, self.length)
        if limit < 1 or self._resting:
            return []
        history = self.history
        for n in range(LONGEST_NGRAM, SHORTEST_NGRAM - 1, -1):
            if len(history) < n:
                continue
            start = self._follows.get(tuple(history[-n:]))
            if start is not None:
                return history[start : start + limit]
        return []

    def record(self, proposed: int, kept: int) -> None:
        """How a draft of ``proposed`` tokens went: all kept, try two more next time; some, try one more than were
        kept; none, try fewer, and after several such drafts in a row rest a while."""
        if proposed <= 0:
            return
        self.drafted += proposed
        self.accepted += kept
        if kept == proposed:
            self.length = min(self.length + 2, LONGEST_DRAFT)
        else:
            self.length = max(kept + 1, 1)
        self._misses = self._misses + 1 if kept == 0 else 0
        if self._misses >= PAUSE_AFTER_MISSES:
            self._misses = 0
            self._resting = PAUSE_TOKENS


def accept_or_resample(
    target: Sequence[float], draft: Sequence[float], guess: int, rng: random.Random
) -> tuple[int, bool]:
    """The speculative-sampling rule for one position: ``guess`` was drawn from ``draft`` (q); keep it with
    probability min(1, p(guess) / q(guess)), else draw from max(0, p - q) renormalised. Returns the token and
    whether the guess was kept. The output is distributed exactly as ``target`` (p), whatever q is."""
    p, q = target[guess], draft[guess]
    if q <= 0 or rng.random() < min(1.0, p / q):
        return guess, True
    residual = [max(0.0, pt - qt) for pt, qt in zip(target, draft, strict=True)]
    total = sum(residual)
    if total <= 0:  # p == q: every guess would have been kept
        return guess, True
    point = rng.random() * total
    for token, weight in enumerate(residual):
        point -= weight
        if point < 0:
            return token, False
    return max(range(len(residual)), key=residual.__getitem__), False
