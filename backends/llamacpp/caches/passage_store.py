"""Kept passage caches: the keys and values llama.cpp computed for a passage's tokens the first
time a prompt held it, kept in memory so that a later prompt holding the same passage joins them instead of reading
it again (``NativeModel.join_span``). Only the scheduler thread uses it.

A cache is good only for the tokens, the model and the adapter it was computed with: it is looked up by the
passage's exact tokens and the adapter (an engine has one model; a changed file gives other passages, so other
tokens). Within ``cap_bytes`` the least recently used go first. With a shelf (``passage_shelf``)
each kept cache is also written to disk, and one not in memory is looked for there, so passages read before a
restart are joined after it. What it approximates: a passage's cache also carries what was read before it where it
was computed (see docs/speed.md).

Kept ``packed`` (the default), a cache's f16 keys and values are held at 8 bits, in memory and on disk
(``kept_state``): about 53% of the room, so twice the passages fit under a cap, each value within
half a step of its block's scale of what llama.cpp computed (docs/speed.md has what that did to answers).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backends.base import AdapterUse
from backends.llamacpp.caches.kept_state import pack, unpack

if TYPE_CHECKING:
    from backends.llamacpp.caches.passage_shelf import PassageShelf

# What the kept caches may take in memory by default: at 28 KB a token for a 1.5B model (SmolLM2-135M: 23 KB), about
# 23 passages of 400 tokens, or about 75 of the ~120-token passages the Debian corpus is cut into.
DEFAULT_CAP_BYTES = 256 * 1024 * 1024

Key = tuple[AdapterUse | None, tuple[int, ...]]


@dataclass(frozen=True)
class KeptPassage:
    state: bytes  # llama.cpp's state of the passage's cells alone (``NativeModel.span_state``)
    computed_at: int  # the position of its first token where it was computed


class PassageStore:
    def __init__(
        self, cap_bytes: int = DEFAULT_CAP_BYTES, shelf: PassageShelf | None = None, packed: bool = True
    ) -> None:
        self.cap_bytes = cap_bytes
        self.shelf = shelf
        self.packed = packed
        self._kept: OrderedDict[Key, KeptPassage] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def has(self, adapter: AdapterUse | None, tokens: Sequence[int]) -> bool:
        if (adapter, tuple(tokens)) in self._kept:
            return True
        return self.shelf is not None and self.shelf.has(adapter, tokens)

    def get(self, adapter: AdapterUse | None, tokens: Sequence[int]) -> KeptPassage | None:
        """The kept cache of exactly these tokens under ``adapter``, as llama.cpp loads it (now the most recently
        used): from memory, else from the shelf (checked there, then kept in memory too); or None, also for one whose
        packed form does not add up (it is dropped)."""
        key = (adapter, tuple(tokens))
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
        else:
            found = self.shelf.get(adapter, tokens) if self.shelf is not None else None
            if found is None:
                return None
            self._remember(key, found)
        state = unpack(found.state)
        if state is None:
            self.drop(adapter, tokens)
            return None
        return KeptPassage(state, found.computed_at)

    def put(self, adapter: AdapterUse | None, tokens: Sequence[int], kept: KeptPassage) -> None:
        """Keep a passage's cache (replacing one of the same tokens) in memory and on the shelf, packed when the
        store packs."""
        if self.packed:
            kept = KeptPassage(pack(kept.state), kept.computed_at)
        self._remember((adapter, tuple(tokens)), kept)
        if self.shelf is not None:
            self.shelf.put(adapter, tokens, kept)

    def _remember(self, key: Key, kept: KeptPassage) -> None:
        """Keep it in memory, then drop the least recently used until the kept ones fit the cap; one larger than the
        whole cap is not kept."""
        self._forget(key)
        if len(kept.state) > self.cap_bytes:
            return
        self._kept[key] = kept
        self._bytes += len(kept.state)
        while self._bytes > self.cap_bytes:
            _, oldest = self._kept.popitem(last=False)
            self._bytes -= len(oldest.state)

    def drop(self, adapter: AdapterUse | None, tokens: Sequence[int]) -> None:
        """Forget a cache llama.cpp refused, in memory and on the shelf."""
        self._forget((adapter, tuple(tokens)))
        if self.shelf is not None:
            self.shelf.drop(adapter, tokens)

    def _forget(self, key: Key) -> None:
        gone = self._kept.pop(key, None)
        if gone is not None:
            self._bytes -= len(gone.state)
