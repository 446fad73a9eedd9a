"""The scheduler's side of saved conversation caches (``backends.llamacpp.caches.saved_slots``): a slot's cache is saved
before it goes, a saved one is loaded when it holds more of a prompt than the slot does, and a deleted
conversation's caches are dropped and never saved. Only the scheduler thread calls it."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from backends.base import AdapterUse
from backends.llamacpp.caches.saved_slot_policy import worth_saving

if TYPE_CHECKING:
    from backends.llamacpp.caches.saved_slots import SavedSlots
    from backends.llamacpp.native import NativeModel

log = logging.getLogger(__name__)


class CachedSlot(Protocol):
    """What a scheduler's slot says of its cache."""

    index: int
    cached: list[int]  # exactly the tokens in its sequence
    adapter: AdapterUse | None
    owner: str


class SlotKeeper:
    def __init__(self, engine: NativeModel, saved: SavedSlots | None) -> None:
        self._engine = engine
        self._saved = saved
        self._forgotten: set[str] = set()  # deleted conversations

    def save(self, slot: CachedSlot, kept: int) -> None:
        """Keep the slot's cache on disk before all but its first ``kept`` tokens go, if that is worth a file."""
        saved = self._saved
        if saved is None or slot.owner in self._forgotten or not worth_saving(slot.cached, kept):
            return
        if saved.covers(slot.adapter, slot.cached):
            return
        saved.save(slot.adapter, slot.cached, self._engine.sequence_state(slot.index), slot.owner)

    def restore(self, slot: CachedSlot, prompt: Sequence[int], reused: int) -> int:
        """Load a saved cache into the slot when it holds more of ``prompt`` than the slot does (what the slot held
        is saved first); how many prompt tokens the slot then holds."""
        saved = self._saved
        if saved is None:
            return reused
        found = saved.best(slot.adapter, prompt, reused)
        if found is None:
            return reused
        state = saved.load(slot.adapter, found.saved)
        if state is None:
            return reused
        self.save(slot, kept=0)
        if not self._engine.restore_sequence(slot.index, state):
            log.warning("llama.cpp refused a saved conversation cache; the prompt is read instead")
            saved.forget(slot.adapter, found.saved)
            slot.cached.clear()
            return 0
        slot.cached[:] = found.saved.tokens
        return found.reused

    def forget(self, owners: set[str], idle: Iterable[CachedSlot]) -> None:
        """The conversations ``owners`` were deleted: the ``idle`` slots holding them are emptied, and no slot of
        theirs is saved from now on (one still answering keeps going)."""
        self._forgotten |= owners
        if self._saved is not None:
            # Deleted here too, on the only thread that saves: a save that was under way as the conversation was
            # deleted (and so wrote its file after Hearth deleted the others) cannot outlive it.
            from backends.llamacpp.caches.saved_slots import forget_owner

            for owner in owners:
                forget_owner(self._saved.root, owner)
        for slot in idle:
            if slot.owner in owners:
                self._engine.forget(slot.index)
                slot.cached.clear()
                slot.owner = ""
