"""Which saved conversation caches to keep, to load and to drop: pure rules for ``saved_slots``,
kept apart so they can be tested without a model or files.

A slot's cache is saved when it is about to be thrown away (a new conversation takes its slot) and when the engine
stops; a later prompt that begins with the same tokens loads it instead of reading them again. Each saved cache is
a :class:`Saved`: its tokens (exactly those whose keys and values it holds), its size on disk, and when it was last
written or loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backends.llamacpp.batch_policy import MIN_PIECE_TOKENS, common_prefix

# A cache shorter than this is not worth a file: the model reads that many tokens in a fraction of a second, and
# every conversation's first tokens (the system prompt) are cached in memory anyway.
MIN_SAVED_TOKENS = 64
# A saved cache is loaded only when it holds at least this many more of the prompt than the slot already does.
MIN_RESTORE_GAIN = 64


@dataclass(frozen=True)
class Saved:
    name: str  # the file's name, unique within its folder
    tokens: tuple[int, ...]
    size: int  # bytes on disk
    used: float  # when it was last written or loaded (seconds since the epoch)


@dataclass(frozen=True)
class Restore:
    saved: Saved
    reused: int  # leading prompt tokens it holds (the rest is read)


def worth_saving(tokens: Sequence[int], kept: int) -> bool:
    """Whether a slot caching ``tokens``, of which the next answer keeps only the first ``kept``, should be saved
    before the rest is dropped."""
    return len(tokens) >= MIN_SAVED_TOKENS and len(tokens) - kept >= MIN_SAVED_TOKENS


def to_restore(saved: Sequence[Saved], prompt: Sequence[int], reused: int) -> Restore | None:
    """The saved cache that holds the longest part of ``prompt`` when it beats the slot's own ``reused`` tokens by
    :data:`MIN_RESTORE_GAIN` (ties: the most recently used). As with a slot's cache, the prompt's last tokens are
    always read (``batch_policy.MIN_PIECE_TOKENS``), so its answer does not depend on where its start came from."""
    limit = max(len(prompt) - MIN_PIECE_TOKENS, 0)
    best: Restore | None = None
    for entry in saved:
        shared = min(common_prefix(entry.tokens, prompt), limit)
        if best is None or (shared, entry.used) > (best.reused, best.saved.used):
            best = Restore(entry, shared)
    if best is None or best.reused < max(reused + MIN_RESTORE_GAIN, MIN_SAVED_TOKENS):
        return None
    return best


def covered(saved: Sequence[Saved], tokens: Sequence[int]) -> bool:
    """Whether a saved cache already holds all of ``tokens`` (they begin it): saving them adds nothing."""
    return any(
        len(entry.tokens) >= len(tokens) and common_prefix(entry.tokens, tokens) == len(tokens) for entry in saved
    )


def superseded(saved: Sequence[Saved], tokens: Sequence[int]) -> list[Saved]:
    """The saved caches that a cache of ``tokens`` holds whole (an earlier turn of the same conversation): they can
    go once it is written."""
    return [
        entry
        for entry in saved
        if len(entry.tokens) < len(tokens) and common_prefix(entry.tokens, tokens) == len(entry.tokens)
    ]


def to_evict(saved: Sequence[Saved], cap_bytes: int) -> list[Saved]:
    """The least recently used caches to delete so the rest fit in ``cap_bytes``."""
    total = sum(entry.size for entry in saved)
    evicted: list[Saved] = []
    for entry in sorted(saved, key=lambda e: (e.used, e.name)):
        if total <= cap_bytes:
            break
        evicted.append(entry)
        total -= entry.size
    return evicted
