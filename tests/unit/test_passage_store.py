"""The kept passage caches' store: found by exact tokens and adapter, least recently used dropped first within
the cap."""

from __future__ import annotations

from backends.base import AdapterUse
from backends.llamacpp.caches.passage_store import KeptPassage, PassageStore


def kept(size: int, at: int = 0) -> KeptPassage:
    return KeptPassage(b"x" * size, at)


def test_a_passage_is_found_by_its_exact_tokens_and_adapter() -> None:
    store = PassageStore(cap_bytes=100)
    tone = AdapterUse("/adapters/tone.gguf", version=3)
    store.put(None, [1, 2, 3], kept(10, at=40))
    assert store.get(None, [1, 2, 3]) == kept(10, at=40)
    assert store.get(None, [1, 2]) is None  # a part of it is another passage
    assert store.get(tone, [1, 2, 3]) is None  # computed without the adapter: worth nothing with it
    assert store.get(AdapterUse("/adapters/tone.gguf", version=4), [1, 2, 3]) is None
    store.put(tone, [1, 2, 3], kept(20))
    assert store.get(tone, [1, 2, 3]) == kept(20) and store.size_bytes == 30


def test_the_least_recently_used_go_first_and_the_cap_holds() -> None:
    store = PassageStore(cap_bytes=100)
    for first in range(3):
        store.put(None, [first], kept(40))
    assert len(store) == 2 and not store.has(None, [0])
    store.get(None, [1])  # now the most recently used
    store.put(None, [3], kept(40))
    assert store.has(None, [1]) and not store.has(None, [2]) and store.size_bytes == 80


def test_replacing_dropping_and_a_cache_larger_than_the_cap() -> None:
    store = PassageStore(cap_bytes=100)
    store.put(None, [1], kept(30))
    store.put(None, [1], kept(50, at=7))
    assert store.get(None, [1]) == kept(50, at=7) and store.size_bytes == 50
    store.put(None, [2], kept(101))
    assert not store.has(None, [2]) and store.size_bytes == 50
    store.drop(None, [1])
    store.drop(None, [9])
    assert len(store) == 0 and store.size_bytes == 0
