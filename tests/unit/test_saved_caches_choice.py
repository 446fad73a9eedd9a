"""Where the engine is told to keep caches on disk: conversations' always (unless 0 MB), kept passages' only while
passages are kept (``HEARTH_RAG__KEEP_PASSAGES``), each in its own folder of the data folder."""

from __future__ import annotations

from pathlib import Path

from app.paths import resolve_data_paths
from app.services.container import _saved_caches
from app.settings import load_settings


def test_both_folders_with_their_caps_by_default(tmp_path: Path) -> None:
    paths = resolve_data_paths(tmp_path)
    saved = _saved_caches(load_settings(home=tmp_path), paths)
    assert saved is not None
    assert (saved.folder, saved.cap_bytes) == (str(paths.conversation_cache_dir), 2048 << 20)
    assert (saved.passages_folder, saved.passages_cap_bytes) == (str(paths.passage_cache_dir), 512 << 20)
    assert Path(saved.passages_folder) != Path(saved.folder)


def test_no_passages_on_disk_when_they_are_not_kept_and_nothing_when_both_are_zero(tmp_path: Path) -> None:
    paths = resolve_data_paths(tmp_path)
    off = _saved_caches(load_settings(home=tmp_path, rag={"keep_passages": False}), paths)
    assert off is not None and off.passages_cap_bytes == 0 and off.cap_bytes == 2048 << 20
    only = _saved_caches(load_settings(home=tmp_path, backend={"conversation_cache_mb": 0}), paths)
    assert only is not None and only.cap_bytes == 0 and only.passages_cap_bytes == 512 << 20
    none = _saved_caches(
        load_settings(home=tmp_path, backend={"conversation_cache_mb": 0, "passage_cache_mb": 0}), paths
    )
    assert (none.cap_bytes, none.passages_cap_bytes) == (0, 0)


def test_kept_passages_are_packed_unless_asked_for_f16(tmp_path: Path) -> None:
    paths = resolve_data_paths(tmp_path)
    assert _saved_caches(load_settings(home=tmp_path), paths).passages_type == "q8_0"
    f16 = load_settings(home=tmp_path, backend={"passage_cache_type": "f16", "passage_cache_mb": 0})
    assert _saved_caches(f16, paths).passages_type == "f16"
