"""Kept passage caches on disk without a model (``llamacpp.caches.passage_shelf``) with made-up states: kept and
found again after a restart, checked whole before anything is handed on, one folder per model and adapter, the least
recently used going first under the cap, owner-only; and the memory store in front of it (``passage_store``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from backends.base import AdapterUse
from backends.llamacpp.caches.passage_shelf import PassageShelf
from backends.llamacpp.caches.passage_store import KeptPassage, PassageStore
from backends.llamacpp.caches.saved_slots import SOURCE, SUFFIX

PASSAGE = tuple(range(500, 540))
STATE = bytes(range(256)) * 40  # 10 KB of "keys and values"


def shelf(root: Path, cap: int = 1 << 20, key: str = "model-a", model_file: Path | None = None) -> PassageShelf:
    return PassageShelf(root, key, cap, model_file)


def files(root: Path) -> list[Path]:
    return sorted(root.glob(f"*/*{SUFFIX}"))


def test_a_kept_passage_is_found_again_by_a_new_shelf_as_it_was(tmp_path: Path) -> None:
    shelf(tmp_path).put(None, PASSAGE, KeptPassage(STATE, 81))
    again = shelf(tmp_path)  # as after a restart
    assert again.has(None, PASSAGE)
    assert again.get(None, PASSAGE) == KeptPassage(STATE, 81)
    assert again.get(None, PASSAGE[:-1]) is None and not again.has(None, PASSAGE[:-1])


def test_a_damaged_or_cut_file_is_deleted_and_never_handed_on(tmp_path: Path) -> None:
    kept = shelf(tmp_path)
    kept.put(None, PASSAGE, KeptPassage(STATE, 81))
    (path,) = files(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-100])  # cut short
    assert kept.get(None, PASSAGE) is None and not path.exists()
    kept.put(None, PASSAGE, KeptPassage(STATE, 81))
    flipped = bytearray(data)
    flipped[-5] ^= 0xFF  # one byte of the state changed
    path.write_bytes(bytes(flipped))
    assert kept.get(None, PASSAGE) is None and not path.exists()
    kept.put(None, PASSAGE, KeptPassage(STATE, 81))
    other = tuple(range(600, 640))
    kept.put(None, other, KeptPassage(STATE, 81))
    kept._path(None, other).replace(path)  # another passage's whole file under this one's name
    assert kept.get(None, PASSAGE) is None and not path.exists()


def test_another_model_or_adapter_finds_nothing(tmp_path: Path) -> None:
    adapter = AdapterUse("/adapters/style.gguf", 1.0, 1)
    shelf(tmp_path).put(None, PASSAGE, KeptPassage(STATE, 81))
    assert shelf(tmp_path, key="model-b").get(None, PASSAGE) is None
    assert shelf(tmp_path).get(adapter, PASSAGE) is None
    shelf(tmp_path).put(adapter, PASSAGE, KeptPassage(STATE[::-1], 81))
    assert shelf(tmp_path).get(adapter, PASSAGE) == KeptPassage(STATE[::-1], 81)
    assert shelf(tmp_path).get(None, PASSAGE) == KeptPassage(STATE, 81)


def test_the_least_recently_used_go_first_under_the_cap(tmp_path: Path) -> None:
    kept = shelf(tmp_path, cap=3 * len(STATE) + 1000)
    passages = [tuple(range(n, n + 40)) for n in (0, 100, 200, 300)]
    for number, tokens in enumerate(passages[:3]):
        kept.put(None, tokens, KeptPassage(STATE, 81))
        os.utime(kept._path(None, tokens), (1000.0 + number, 1000.0 + number))
    assert kept.get(None, passages[0]) is not None  # used now: the most recent
    kept.put(None, passages[3], KeptPassage(STATE, 81))
    assert [kept.has(None, tokens) for tokens in passages] == [True, False, True, True]
    kept.put(None, tuple(range(900, 940)), KeptPassage(STATE * 400, 81))  # larger than the whole cap: not kept
    assert len(files(tmp_path)) == 3


def test_the_caches_of_a_model_file_changed_since_are_deleted_at_start(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF one")
    root = tmp_path / "passages"
    shelf(root, model_file=model).put(None, PASSAGE, KeptPassage(STATE, 81))
    assert len(files(root)) == 1 and len(list(root.glob(f"*/{SOURCE}"))) == 1
    shelf(root, model_file=model)
    assert len(files(root)) == 1  # the same file: kept
    model.write_bytes(b"GGUF two, another size")
    shelf(root, model_file=model)
    assert files(root) == []


def test_the_folders_and_files_are_the_owner_s_alone(tmp_path: Path) -> None:
    root = tmp_path / "passages"
    shelf(root).put(None, PASSAGE, KeptPassage(STATE, 81))
    (path,) = files(root)
    for folder in (root, path.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_memory_store_looks_on_the_shelf_and_forgets_in_both(tmp_path: Path) -> None:
    PassageStore(shelf=shelf(tmp_path)).put(None, PASSAGE, KeptPassage(STATE, 81))
    store = PassageStore(shelf=shelf(tmp_path))  # a new engine: nothing in memory
    assert len(store) == 0 and store.has(None, PASSAGE)
    assert store.get(None, PASSAGE) == KeptPassage(STATE, 81)
    assert len(store) == 1  # now in memory too
    store.drop(None, PASSAGE)  # llama.cpp refused it
    assert not store.has(None, PASSAGE) and files(tmp_path) == []
    memory_only = PassageStore()
    memory_only.put(None, PASSAGE, KeptPassage(STATE, 81))
    assert memory_only.has(None, PASSAGE) and files(tmp_path) == []
