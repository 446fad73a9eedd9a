"""Prompt-lookup decoding, the pure part: drafts of the next tokens found by matching the answer's last few tokens
against what came before (the prompt with its passages, and the answer so far), and how long a draft pays on this
machine (:class:`DraftPolicy`: from what guesses were kept and what a step of several tokens was measured to cost).

An answer from documents copies phrases from its passages; when its last two or three tokens occurred earlier, the
tokens that followed them there are a good guess at what comes next. The engine evaluates the guess in the same
``llama_decode`` as the answer's next token and keeps the longest prefix the model itself would have chosen
(``backends/llamacpp/batch.py``), so one step can write several tokens. What that saves depends on the machine:
where writing a token is bound by reading the weights, the extra positions come almost free; on a 2-core CPU
each costs a good part of a step, and only a short guess that is usually right pays.

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
LONGEST_DRAFT = 15  # tokens guessed at most in one step (16 evaluated with the answer's next token)
EXPLORE_EVERY = 16  # while guesses do not pay, still try one token this often, to notice when they start to
PRIOR_PASSES, PRIOR_TRIES = 1.2, 2.0  # before anything is seen: a guess is kept 60% of the time, weighed as 2 tries
PRIOR_SLOPE = 0.1  # before anything is measured: each extra token costs a tenth of a step (memory-bound)
COST_WEIGHT = 0.2  # how much a new timing moves the running figure for its token count


@dataclass
class PromptLookup:
    """One answer's lookup: the tokens so far (prompt, then answer) and where each run of 2 or 3 tokens was last
    followed by something. Not thread-safe: the engine's scheduler thread alone uses it."""

    history: list[int] = field(default_factory=list)
    drafted: int = 0  # tokens guessed over the whole answer
    accepted: int = 0  # of them, the ones kept
    _follows: dict[tuple[int, ...], int] = field(default_factory=dict)  # a run -> the position after its latest

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

    def draft(self, most: int) -> list[int]:
        """Up to ``most`` tokens that followed the latest earlier occurrence of the longest matching run of last
        tokens; none when nothing matches."""
        if most < 1:
            return []
        history = self.history
        for n in range(LONGEST_NGRAM, SHORTEST_NGRAM - 1, -1):
            if len(history) < n:
                continue
            start = self._follows.get(tuple(history[-n:]))
            if start is not None:
                return history[start : start + most]
        return []

    def record(self, proposed: int, kept: int) -> None:
        self.drafted += proposed
        self.accepted += kept


@dataclass
class DraftPolicy:
    """How many guessed tokens pay on this machine, learnt while the engine runs (one per loaded model).

    A step that evaluates n tokens costs ``cost(n)`` times a plain step: on a GPU or a wide CPU close to 1 for any
    small n (writing a token reads the weights, which the extra positions share); on a 2-core laptop CPU much more
    (measured 1.44x for 2 tokens, 2.1x for 4, 3.2x for 8 with a 1.5B model). A guess of k tokens writes 1 + (the
    guesses kept) tokens, and the i-th guess is kept with probability ``kept_at_least(i)``. The length chosen
    maximises tokens written per unit of time, (1 + sum of kept_at_least(1..k)) / cost(k + 1), and is 0 (no guess)
    when no length beats a plain step; then one token is still tried every ``EXPLORE_EVERY`` chances."""

    _cost_s: dict[int, float] = field(default_factory=dict)  # running time of a step of n tokens, n -> seconds
    _tries: list[float] = field(default_factory=lambda: [0.0] * (LONGEST_DRAFT + 1))  # guesses i reached
    _passes: list[float] = field(default_factory=lambda: [0.0] * (LONGEST_DRAFT + 1))  # guesses i kept
    _idle: int = 0

    def observe_step(self, tokens: int, seconds: float) -> None:
        """A writing step of one answer that evaluated ``tokens`` tokens in ``seconds``."""
        known = self._cost_s.get(tokens)
        self._cost_s[tokens] = seconds if known is None else known + COST_WEIGHT * (seconds - known)

    def observe_draft(self, proposed: int, kept: int) -> None:
        """A guess of ``proposed`` tokens of which the first ``kept`` were kept: guess i was reached when the ones
        before it were kept (the ones after the first miss say nothing)."""
        for i in range(1, min(proposed, LONGEST_DRAFT) + 1):
            if i > kept + 1:
                break
            self._tries[i] += 1
            self._passes[i] += i <= kept

    def cost(self, tokens: int) -> float:
        """A step of ``tokens`` tokens against a plain one: measured, or between the nearest measured ones, or the
        prior beyond them."""
        plain = self._cost_s.get(1)
        if tokens <= 1 or not plain:
            return 1.0 + PRIOR_SLOPE * max(tokens - 1, 0)
        if tokens in self._cost_s:
            return self._cost_s[tokens] / plain
        below = max((n for n in self._cost_s if n < tokens), default=1)
        above = min((n for n in self._cost_s if n > tokens), default=None)
        low = self._cost_s[below] / plain
        if above is None:
            return low + PRIOR_SLOPE * (tokens - below)
        high = self._cost_s[above] / plain
        return low + (high - low) * (tokens - below) / (above - below)

    def kept_at_least(self, i: int) -> float:
        """The chance that the first ``i`` guesses are all kept, from each guess's share kept once reached."""
        chance = 1.0
        for j in range(1, i + 1):
            chance *= (self._passes[j] + PRIOR_PASSES) / (self._tries[j] + PRIOR_TRIES)
        return chance

    def length(self, most: int) -> int:
        """How many tokens to guess now, at most ``most``."""
        best, best_rate, expected = 0, 1.0, 1.0
        for k in range(1, min(most, LONGEST_DRAFT) + 1):
            expected += self.kept_at_least(k)
            rate = expected / self.cost(k + 1)
            if rate > best_rate:
                best, best_rate = k, rate
        if best == 0 and most >= 1:
            self._idle += 1
            if self._idle >= EXPLORE_EVERY:
                self._idle = 0
                return 1
        return best


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
