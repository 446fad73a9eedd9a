"""Which slot a new request takes and how one decode step's tokens are shared: pure rules of the llama.cpp
scheduler (``backends.llamacpp.batch``), kept apart so they can be tested without a model.

One rule shapes both: a prompt is never read in a piece of one token (unless it is one token long). llama.cpp's
CPU kernels sum the attention of a lone query token in another order than that of several (ggml's dot product
versus llamafile's matrix kernel), so a prompt token read alone gets different last bits, and a greedy answer
can change a few tokens later (measured on SmolLM2: 2 of 4 prompts). Pieces of two or more give the same bits
however the prompt is cut, so an answer does not depend on the prefix cache or on the other slots' work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FreeSlot:
    """A slot no request holds: what its sequence still caches, and when it last answered (a step counter)."""

    index: int
    cached: Sequence[int]
    last_used: int


@dataclass(frozen=True)
class SlotChoice:
    index: int
    reused: int  # leading prompt tokens already in that slot's sequence


def common_prefix(left: Sequence[int], right: Sequence[int]) -> int:
    count = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        count += 1
    return count


# Prompt tokens read again even when cached: sampling needs the last one's logits, and a piece is never one.
MIN_PIECE_TOKENS = 2
# A free slot is chosen for its cache only when the cache holds at least this share of the new prompt. Below it
# the request takes the slot idle longest instead, so one conversation's cache is not thrown away for the sake
# of a system prompt that every conversation shares (llama.cpp's server has the same rule and default).
REUSE_SHARE = 0.5


def choose_slot(free: Sequence[FreeSlot], prompt: Sequence[int]) -> SlotChoice:
    """The free slot whose cache shares the longest prefix with ``prompt``, if that is a good part of it;
    otherwise the slot idle longest (never used counts as longest). Ties go to the lower index. The last two
    prompt tokens are always read again (see the module's note)."""
    if not free:
        raise ValueError("no free slot")
    shared = {slot.index: common_prefix(slot.cached, prompt) for slot in free}
    best = min(free, key=lambda slot: (-shared[slot.index], slot.last_used, slot.index))
    if shared[best.index] < REUSE_SHARE * len(prompt):
        best = min(free, key=lambda slot: (slot.last_used, slot.index))
    reused = min(shared[best.index], max(len(prompt) - MIN_PIECE_TOKENS, 0))
    return SlotChoice(best.index, reused)


def prefill_shares(pending: Sequence[int], decoding: int, batch_tokens: int, chunk_tokens: int) -> list[int]:
    """Prompt tokens each prefilling slot evaluates this step, in arrival order (first come, first filled).

    ``pending`` is what each still has to read; ``decoding`` slots take one token each from ``batch_tokens``.
    While any slot is decoding, prompts share at most ``chunk_tokens`` per step, so a long prompt delays the
    others' next token by one chunk's time rather than by the whole prompt's."""
    room = max(batch_tokens - decoding, 0)
    if decoding:
        room = min(room, chunk_tokens)
    shares = []
    for remaining in pending:
        share = _piece(remaining, room)
        shares.append(share)
        room -= share
    return shares


def _piece(remaining: int, room: int) -> int:
    """The longest piece of ``remaining`` prompt tokens that fits ``room`` without a one-token piece now or
    later (a one-token prompt is read as it is)."""
    if remaining <= room:
        return remaining
    share = room - 1 if remaining - room == 1 else room
    return share if share >= MIN_PIECE_TOKENS else 0


def gap_moves(busy: Iterable[int]) -> list[tuple[int, int]]:
    """Moves (from, to) after which the busy slots sit side by side: the highest busy slot goes into the lowest
    free slot below it, until no free slot is left between busy ones.

    llama.cpp evaluates several sequences in one pass only when their ids follow each other; busy slots 1 and 3
    cost two passes per token where slots 1 and 2 cost one. Moving a sequence copies its cache once."""
    occupied = set(busy)
    moves: list[tuple[int, int]] = []
    while occupied:
        highest = max(occupied)
        holes = [index for index in range(min(occupied), highest) if index not in occupied]
        if not holes:
            break
        moves.append((highest, holes[0]))
        occupied.remove(highest)
        occupied.add(holes[0])
    return moves


def prefix_donor(donors: Sequence[FreeSlot], prompt: Sequence[int], reused: int) -> SlotChoice | None:
    """Of the other free slots, the one whose cache holds the longest beginning of ``prompt``, and how many of its
    tokens to copy, when that is more than the ``reused`` tokens the chosen slot holds already; None otherwise. The
    last two prompt tokens are read again all the same (see the module's note). Ties go to the lower index."""
    limit = max(len(prompt) - MIN_PIECE_TOKENS, 0)
    best: SlotChoice | None = None
    for donor in donors:
        shared = min(common_prefix(donor.cached, prompt), limit)
        if shared > (best.reused if best else reused):
            best = SlotChoice(donor.index, shared)
    return best


ANY_ADAPTER = object()  # no answer in progress: the first waiting request chooses the adapter


def admissible(wanted: Sequence[object], free: int, current: object) -> int:
    """How many of the waiting requests, whose adapters (None: without one) are ``wanted`` in arrival order, may take
    the ``free`` slots now. One context answers with one adapter at a time, so a request for another adapter than
    ``current`` (the answers in progress's, or ``ANY_ADAPTER``) waits until those answers end, and the requests
    behind it wait their turn too."""
    count = 0
    for adapter in wanted[:free]:
        if current is ANY_ADAPTER:
            current = adapter
        elif adapter != current:
            break
        count += 1
    return count
