"""Excerpts: the best sentences of more passages than the prompt holds, packed into the room the first passages
would take. Pure: the caller scores the windows (with the embedding model) and counts tokens.

A question asked in the user's own words often finds its answer in the 4th to 8th passage of the ranking (on the
tuning half of ``bench/data/user-words-answers.jsonl`` the first 3 passages held it for 40 of 50 questions, the first
8 for 46). Each of those passages is cut into windows of :data:`WINDOW` sentences; a window scores its similarity to
the question plus a small bonus for its passage's rank (:data:`RANK_PRIOR` / (1 + rank)); windows are taken best
first while their new sentences fit, from at most ``most_passages`` passages. Each passage gives one excerpt: its
chosen sentences in their order, with "…" where sentences were left out, so a citation still names one page.
Settings chosen on the tuning half (``bench/passage_recall.py``): 8 passages, windows of 3, prior 0.1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

WINDOW = 3  # sentences a window spans (a definition and the sentences that qualify it)
RANK_PRIOR = 0.1  # the weight of the ranking's own order beside a window's similarity
CANDIDATES = 8  # passages of the ranking read for excerpts
GAP = " … "
MORE_PASSAGES = 2  # excerpts may come from this many passages more than top_k, in the same room

# A sentence ends at ., ! ?, or : before white space, or at a line break (list items, table rows, option entries).
_BOUNDARY = re.compile(r"(?<=[.!?:])\s+|\s*\n\s*")


def sentences(text: str) -> list[str]:
    return [s for s in (piece.strip() for piece in _BOUNDARY.split(text)) if s]


@dataclass(frozen=True)
class Window:
    passage: int  # the passage's place in the ranking, from 0
    first: int  # its first sentence
    last: int  # one past its last sentence
    text: str


def windows(passages: Sequence[Sequence[str]], size: int = WINDOW, stride: int = 1) -> list[Window]:
    """The runs of ``size`` sentences (fewer at a passage's end) of each passage, given as its sentences, one
    starting every ``stride`` sentences."""
    found = []
    for rank, said in enumerate(passages):
        for start in range(0, len(said), stride):
            end = min(start + size, len(said))
            found.append(Window(rank, start, end, " ".join(said[start:end])))
    return found


def choose(
    passages: Sequence[Sequence[str]],
    found: Sequence[Window],
    similarity: Sequence[float],
    cost: Callable[[str], int],
    budget: int,
    most_passages: int,
) -> list[tuple[int, list[int]]]:
    """The sentences to give, as (passage, its chosen sentence indices in order), the passage holding the best
    window first. ``cost`` counts a sentence's tokens; the chosen sentences cost at most ``budget``."""
    scored = sorted(
        range(len(found)),
        key=lambda i: similarity[i] + RANK_PRIOR / (1 + found[i].passage),
        reverse=True,
    )
    chosen: dict[int, set[int]] = {}
    used = 0
    for i in scored:
        window = found[i]
        if window.passage not in chosen and len(chosen) >= most_passages:
            continue
        taken = chosen.get(window.passage, set())
        new = [k for k in range(window.first, window.last) if k not in taken]
        price = sum(cost(passages[window.passage][k]) for k in new)
        if not new or used + price > budget:
            continue
        chosen.setdefault(window.passage, set()).update(new)
        used += price
    return [(passage, sorted(indices)) for passage, indices in chosen.items()]


def excerpt(said: Sequence[str], indices: Sequence[int]) -> str:
    """The chosen sentences in their order, with :data:`GAP` where sentences were left out (and at either end
    when the excerpt does not begin or end the passage)."""
    pieces: list[str] = []
    previous = -1
    for index in indices:
        if index != previous + 1:
            pieces.append(GAP.strip())
        pieces.append(said[index])
        previous = index
    if indices and indices[-1] != len(said) - 1:
        pieces.append(GAP.strip())
    return " ".join(pieces)
