"""Saved conversation caches without a model: which to load, keep and drop (``saved_slot_policy``), the file format
and its checks, and the folder's rules (``saved_slots``) with made-up states."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from backends.base import AdapterUse
from backends.llamacpp.caches.saved_slot_policy import (
    MIN_RESTORE_GAIN,
    MIN_SAVED_TOKENS,
    Saved,
    covered,
    superseded,
    to_evict,
    to_restore,
    worth_saving,
)
from backends.llamacpp.caches.saved_slots import (
    SUFFIX,
    SavedSlots,
    decode,
    encode,
    forget_owner,
    owner_tag,
    read_tokens,
)

LONG = tuple(range(1000, 1300))  # a conversation of 300 tokens


def saved(tokens: tuple[int, ...], name: str = "a", size: int = 10, used: float = 0.0) -> Saved:
    return Saved(name, tokens, size, used)


def test_a_slot_is_saved_only_when_enough_of_it_would_be_lost() -> None:
    assert worth_saving(LONG, kept=0)
    assert worth_saving(LONG, kept=len(LONG) - MIN_SAVED_TOKENS)
    assert not worth_saving(LONG, kept=len(LONG) - MIN_SAVED_TOKENS + 1)  # the next turn keeps almost all of it
    assert not worth_saving(LONG[: MIN_SAVED_TOKENS - 1], kept=0)  # read again in a moment


def test_the_saved_cache_holding_most_of_the_prompt_is_loaded_when_it_beats_the_slot() -> None:
    prompt = [*LONG, 7, 8, 9]
    short, whole = saved(LONG[:150], "short"), saved(LONG, "whole")
    found = to_restore([short, whole], prompt, reused=20)
    assert found is not None and found.saved == whole and found.reused == len(LONG)
    assert to_restore([whole], prompt, reused=len(LONG) - MIN_RESTORE_GAIN + 1) is None  # the slot has nearly all
    assert to_restore([], prompt, reused=0) is None
    assert to_restore([saved((5, 6, 7, *LONG))], prompt, reused=0) is None  # another conversation from the start


def test_the_last_prompt_tokens_are_always_read_and_a_tie_goes_to_the_most_recent() -> None:
    found = to_restore([saved(LONG, "old", used=1.0), saved(LONG, "new", used=2.0)], list(LONG), reused=0)
    assert found is not None and found.saved.name == "new"
    assert found.reused == len(LONG) - 2  # the same tokens: all but the last two come from the file


def test_a_cache_held_whole_by_another_is_not_saved_and_an_older_turn_is_replaced() -> None:
    turn_one, turn_two = saved(LONG[:200], "one"), saved(LONG, "two")
    assert covered([turn_two], LONG[:200]) and covered([turn_two], LONG)
    assert not covered([turn_one], LONG)
    assert superseded([turn_one, turn_two], LONG) == [turn_one]
    assert superseded([saved((1, *LONG[1:100]))], LONG) == []  # differs at the start: another conversation


def test_the_least_recently_used_go_first_until_the_rest_fit() -> None:
    entries = [saved((), "b", 40, used=2.0), saved((), "a", 40, used=1.0), saved((), "c", 40, used=3.0)]
    assert [e.name for e in to_evict(entries, 120)] == []
    assert [e.name for e in to_evict(entries, 100)] == ["a"]
    assert [e.name for e in to_evict(entries, 39)] == ["a", "b", "c"]


def test_a_file_comes_back_only_whole_unchanged_and_for_its_own_key() -> None:
    state = bytes(range(256)) * 4
    data = b"".join(encode(b"model", LONG, state))
    assert decode(b"model", data) == (LONG, state)
    assert decode(b"other model", data) is None
    flipped = bytearray(data)
    flipped[-10] ^= 1
    assert decode(b"model", bytes(flipped)) is None
    assert decode(b"model", data[:-1]) is None
    assert decode(b"model", data[:20]) is None
    assert decode(b"model", b"") is None


def test_the_folder_keeps_each_model_and_adapter_apart_and_private(tmp_path: Path) -> None:
    slots = SavedSlots(tmp_path / "saved", "model-a|123", cap_bytes=1 << 20)
    adapter = AdapterUse("/adapters/tone.gguf", 1.0, version=5)
    slots.save(None, LONG, b"base state")
    slots.save(adapter, LONG, b"adapted state")
    assert slots.folder(None) != slots.folder(adapter)
    found = slots.best(adapter, [*LONG, 1, 2], reused=0)
    assert found is not None and slots.load(adapter, found.saved) == b"adapted state"
    base = slots.best(None, [*LONG, 1, 2], reused=0)
    assert base is not None and slots.load(None, base.saved) == b"base state"
    assert SavedSlots(tmp_path / "saved", "model-b|123", cap_bytes=1 << 20).best(None, list(LONG), 0) is None
    assert stat.S_IMODE((tmp_path / "saved").stat().st_mode) == 0o700
    for path in (tmp_path / "saved").glob(f"*/*{SUFFIX}"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not list((tmp_path / "saved").glob("*/.saving-*"))  # no temporary file left behind


def test_a_longer_turn_replaces_the_shorter_and_the_cap_drops_the_least_recently_used(tmp_path: Path) -> None:
    slots = SavedSlots(tmp_path, "model", cap_bytes=3000)
    slots.save(None, LONG[:200], b"x" * 500)
    slots.save(None, LONG, b"y" * 500)  # 56 + 4 x 300 + 500 = 1,756 bytes
    assert [e.tokens for e in slots.entries(None)] == [LONG]  # the first turn is held by the second
    slots.save(None, tuple(range(5000, 5100)), b"z" * 200)  # 656 bytes
    (first,) = (e for e in slots.entries(None) if e.tokens == LONG)
    os.utime(slots.folder(None) / first.name, (1, 1))  # loaded long ago
    slots.save(None, tuple(range(7000, 7100)), b"w" * 200)  # 3,068 bytes in all, over the cap
    assert {e.tokens[0] for e in slots.entries(None)} == {5000, 7000}


def test_a_damaged_or_vanished_file_is_a_miss_and_is_removed(tmp_path: Path) -> None:
    slots = SavedSlots(tmp_path, "model", cap_bytes=1 << 20)
    slots.save(None, LONG, b"state" * 100)
    (entry,) = slots.entries(None)
    path = slots.folder(None) / entry.name
    assert read_tokens(path) == (LONG, path.stat().st_size)
    path.write_bytes(path.read_bytes()[:-3])  # cut short: its header no longer matches its size
    assert read_tokens(path) is None
    assert slots.load(None, entry) is None and not path.exists()
    assert slots.entries(None) == []
    assert slots.load(None, entry) is None  # gone already: still only a miss


def test_a_state_larger_than_the_cap_is_not_written(tmp_path: Path) -> None:
    slots = SavedSlots(tmp_path, "model", cap_bytes=100)
    slots.save(None, LONG, b"s" * 200)
    assert slots.entries(None) == []


def test_what_a_killed_write_left_is_swept_once_it_is_old(tmp_path: Path) -> None:
    folder = tmp_path / "model-folder"
    folder.mkdir()
    old, fresh = folder / ".saving-abc", folder / ".saving-def"
    old.write_bytes(b"half")
    fresh.write_bytes(b"being written")
    os.utime(old, (1, 1))
    SavedSlots(tmp_path, "model", cap_bytes=1 << 20)
    assert not old.exists() and fresh.exists()


def test_a_conversations_caches_are_named_for_it_and_deleted_with_it_for_every_model(tmp_path: Path) -> None:
    one, two = SavedSlots(tmp_path, "model-a", 1 << 20), SavedSlots(tmp_path, "model-b", 1 << 20)
    one.save(None, LONG, b"a", owner="conversation-1")
    two.save(None, LONG, b"b", owner="conversation-1")
    one.save(None, tuple(range(100)), b"c", owner="conversation-2")
    one.save(None, tuple(range(200, 300)), b"d")  # an API answer: nobody's conversation
    names = sorted(path.name for path in tmp_path.glob(f"*/*{SUFFIX}"))
    assert all("conversation" not in name for name in names)  # the id itself is not in the name
    assert sum(name.startswith(owner_tag("conversation-1") + "-") for name in names) == 2
    assert forget_owner(tmp_path, "conversation-1") == 2
    left = sorted(path.name.split("-", 1)[0] for path in tmp_path.glob(f"*/*{SUFFIX}"))
    assert left == sorted([owner_tag("conversation-2"), "anyone"])


def test_the_caches_of_a_removed_or_changed_model_file_go_at_the_next_start(tmp_path: Path) -> None:
    kept_model, changed_model, removed_model = (tmp_path / f"{name}.gguf" for name in ("kept", "changed", "removed"))
    for model in (kept_model, changed_model, removed_model):
        model.write_bytes(b"GGUF weights")
    root = tmp_path / "saved"
    folders = {}
    for model in (kept_model, changed_model, removed_model):
        slots = SavedSlots(root, f"{model}|key", 1 << 20, model)
        slots.save(None, LONG, b"state")
        folders[model.stem] = slots.folder(None)
    assert all(folder.is_dir() for folder in folders.values())
    removed_model.unlink()
    changed_model.write_bytes(b"GGUF other weights")  # another size: the caches no longer fit its weights
    SavedSlots(root, "another model", 1 << 20)  # an engine starts
    assert folders["kept"].is_dir() and len(list(folders["kept"].glob(f"*{SUFFIX}"))) == 1
    assert not folders["changed"].exists() and not folders["removed"].exists()
