"""Kept passages with several slots: saving a span of a slot's cells and joining a kept span into
a slot when each slot has a KV stream of its own.

With one slot, a span goes through a scratch sequence in the slot's stream (``NativeModel.span_state``,
``join_span``): llama.cpp only relabels cells. With a stream per slot there is no such sequence (llama.cpp copies
between streams only whole), so the cells travel as bytes (``backends.llamacpp.caches.state_cells``):

- saving: the slot's state, cut to the span's positions;
- joining: the slot's state is kept aside; the span alone (less its first ``skip`` tokens) is loaded into the slot,
  moved to its place, and one token is evaluated after it, which makes llama.cpp turn its keys for the new positions
  now (the token is dropped again); then the slot is loaded with its own cells followed by the span's, in that order,
  as reading would lay them. Whatever fails on the way, the slot is loaded back as it was.

Only between two decodes, when no copy into the slot is pending. Each join costs the copies of the slot's state
(a few tens of MB for a long prompt) and one token's evaluation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backends.llamacpp.caches.state_cells import joined, sliced

if TYPE_CHECKING:
    from backends.llamacpp.native import NativeModel, TokenBatch

NUDGE_TOKEN = 0  # what is evaluated after a moved span to have its keys turned (any token: it is dropped)


def span_apart(model: NativeModel, sequence: int, start: int, stop: int) -> bytes:
    """The state of ``sequence``'s cells at positions ``start`` to ``stop`` (exclusive) alone; empty when llama.cpp's
    state is laid out otherwise than Hearth knows (the passage is then not kept)."""
    return sliced(model.sequence_state(sequence), lambda position: start <= position < stop) or b""


def join_apart(
    model: NativeModel, nudge: TokenBatch, sequence: int, state: bytes, computed_at: int, place_at: int, skip: int
) -> bool:
    """``join_span`` for a slot with a stream of its own (see the module's docstring); False, with the slot as it
    was, when llama.cpp refuses the state or Hearth cannot lay it out."""
    import llama_cpp

    before = model.sequence_state(sequence)
    span = sliced(state, lambda position: position >= computed_at + skip, model.streams)
    if span is None or not model.restore_sequence(sequence, span):
        return _put_back(model, sequence, before)
    if place_at != computed_at:
        llama_cpp.llama_memory_seq_add(model.memory, sequence, -1, -1, place_at - computed_at)
        after = int(llama_cpp.llama_memory_seq_pos_max(model.memory, sequence)) + 1
        nudge.clear()
        nudge.add(NUDGE_TOKEN, after, sequence, False)
        if model.decode(nudge) != 0:
            return _put_back(model, sequence, before)
        model.forget(sequence, after)
    whole = joined(before, model.sequence_state(sequence), model.streams)
    if whole is None or not model.restore_sequence(sequence, whole):
        return _put_back(model, sequence, before)
    return True


def _put_back(model: NativeModel, sequence: int, before: bytes) -> bool:
    model.restore_sequence(sequence, before)
    return False
