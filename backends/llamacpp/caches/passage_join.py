"""Passages read once: the scheduler's side of kept passage caches.

When a slot has read a passage of its prompt, the passage's cache is kept (``PassageStore``); when a later prompt
holds a kept passage right where the slot's cache ends, its cache is joined there instead of the passage being read
again. ``BatchScheduler`` asks this class where to stop reading before such a passage and when to join it; the
scheduler owns the slots and the step, this class the store and the engine calls that keep and join.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from backends.base import AdapterUse
from backends.llamacpp.batch_policy import MIN_PIECE_TOKENS
from backends.llamacpp.batch_state import Answer, Request, Slot
from backends.llamacpp.caches.passage_store import KeptPassage, PassageStore
from backends.llamacpp.caches.prompt_spans import Span

if TYPE_CHECKING:
    from backends.llamacpp.native import NativeModel

log = logging.getLogger(__name__)


class PassageJoiner:
    """Keeps the caches of passages as slots read them, and joins them into later prompts that hold them."""

    def __init__(self, engine: NativeModel, store: PassageStore | None = None) -> None:
        self._engine = engine
        self.store = store if store is not None else PassageStore()

    def cut_before_kept(self, request: Request, adapter: AdapterUse | None, reused: int) -> int:
        """Where the reused cache ends inside a passage whose cache is kept (the passage that stood there before
        began with the same tokens), it is cut back to where the passage's kept cache is joined (past the tokens
        read again, which the reused cache holds as they are read), so the rest of the passage is joined."""
        for span in request.spans:
            if span.start < reused < span.stop and self.store.has(adapter, request.prompt[span.start : span.stop]):
                return min(reused, span.start + _read_again(request, span))
        return reused

    def advance(self, slot: Slot, answer: Answer) -> bool:
        """Keep the caches of the passages the slot has just read, and join the kept caches of the passages that
        come next instead of reading them (each right where the slot's cache ends). A passage that ends within the
        prompt's last two tokens is read (sampling needs a piece of two), and one llama.cpp refuses is dropped and
        read. True when a joined passage's keys are still to be turned for their new places, which llama.cpp does
        at the next llama_decode."""
        spans, prompt = answer.request.spans, answer.request.prompt
        turn_later = False
        while answer.spans_seen < len(spans):
            span = spans[answer.spans_seen]
            at = len(slot.cached)
            tokens = prompt[span.start : span.stop]
            if span.stop <= at:  # read by now (in this answer, or found in the slot's cache)
                if span.start >= answer.reused and not self.store.has(slot.adapter, tokens):
                    state = self._engine.span_state(slot.index, span.start, span.stop)
                    if state:  # empty: llama.cpp's state is laid out otherwise than Hearth knows
                        self.store.put(slot.adapter, tokens, KeptPassage(state, span.start))
                answer.spans_seen += 1
                continue
            if slot.answer is not answer or answer.next_token is not None:
                break  # ended, or its prompt is read
            fresh = _read_again(answer.request, span)
            if span.start + fresh != at or fresh == len(tokens) or span.stop > len(prompt) - MIN_PIECE_TOKENS:
                break
            kept = self.store.get(slot.adapter, tokens)
            if kept is None:
                break
            if not self._engine.join_span(slot.index, kept.state, kept.computed_at, span.start, skip=fresh):
                log.warning("llama.cpp refused a kept passage cache; the passage is read instead")
                self.store.drop(slot.adapter, tokens)
                break
            slot.cached.extend(tokens[fresh:])
            del answer.pending[: len(tokens) - fresh]
            answer.joined += len(tokens) - fresh
            answer.spans_seen += 1
            turn_later = turn_later or (self._engine.turns_later and kept.computed_at != span.start)
        return turn_later

    def readable(self, slot: Slot, answer: Answer) -> int:
        """How much of the prompt left to read goes before the next passage whose cache is kept (all of it when
        none is), with that passage's tokens read again, leaving the rest of it to be joined at the next step."""
        spans, prompt = answer.request.spans, answer.request.prompt
        at = len(slot.cached)
        for span in spans[answer.spans_seen :]:
            fresh = _read_again(answer.request, span)
            ahead = span.start + fresh - at
            fits = span.stop <= len(prompt) - MIN_PIECE_TOKENS and fresh < span.stop - span.start
            if ahead >= MIN_PIECE_TOKENS and fits and self.store.has(slot.adapter, prompt[span.start : span.stop]):
                return ahead
        return len(answer.pending)


def recomputed(length: int, share: float) -> int:
    """Of a joined passage of ``length`` tokens, how many of its first tokens are read again (``share`` of them,
    rounded; all of them when the share is 1 or more, none when it is 0 or less)."""
    return max(0, min(length, round(length * share)))


def _read_again(request: Request, span: Span) -> int:
    """How many of the first tokens of the passage at ``span`` are read again when it is joined."""
    return recomputed(span.stop - span.start, request.params.passage_recompute)
