"""The Chroma server chosen on the page (``app.services.library.chroma_choice``) without a server: kept owner-only
and read back, a damaged file read as no choice, the settings winning over the page, a bad address refused before
anything is kept; and what the Documents tab's section says in each case."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from app.services.library.chroma_choice import ServerChoice, ServerChoiceFile, choose, current_choice
from app.settings import load_settings
from app.ui.chroma_server_section import server_status
from rag.chroma_server import ChromaServerSettingError


def test_the_choice_is_kept_owner_only_and_read_back(tmp_path: Path) -> None:
    book = ServerChoiceFile(tmp_path / "chroma-server.json")
    assert book.load() is None
    book.save(ServerChoice("http://10.0.0.5:8000", tmp_path / "token", None))
    assert book.load() == ServerChoice("http://10.0.0.5:8000", tmp_path / "token", None)
    assert stat.S_IMODE(book.path.stat().st_mode) == 0o600  # it names the token's file
    book.clear()
    assert book.load() is None and not book.path.exists()
    book.clear()  # nothing to clear: fine


def test_a_damaged_choice_is_read_as_none(tmp_path: Path) -> None:
    path = tmp_path / "chroma-server.json"
    for text in ("{not json", "[]", '{"address": "http://x:1"}'):
        path.write_text(text)
        assert ServerChoiceFile(path).load() is None


def test_the_settings_win_over_the_page(tmp_path: Path) -> None:
    path = tmp_path / "chroma-server.json"
    ServerChoiceFile(path).save(ServerChoice("http://10.0.0.5:8000"))
    from_page = current_choice(load_settings(home=tmp_path), path)
    assert from_page == ServerChoice("http://10.0.0.5:8000", source="page")
    set_there = current_choice(load_settings(home=tmp_path, rag={"chroma_url": "http://10.0.0.9:8000"}), path)
    assert set_there is not None and (set_there.url, set_there.source) == ("http://10.0.0.9:8000", "settings")
    assert current_choice(load_settings(home=tmp_path), tmp_path / "none.json") is None


def test_a_bad_address_or_token_file_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "chroma-server.json"
    with pytest.raises(ChromaServerSettingError):
        choose(path, "ftp://10.0.0.5")
    loose = tmp_path / "token"
    loose.write_text("secret\n")
    loose.chmod(0o644)
    with pytest.raises(ChromaServerSettingError) as refused:
        choose(path, "http://127.0.0.1:8000", token_file=str(loose))
    assert "token" in refused.value.message.lower()
    assert not path.exists()


def test_the_section_says_where_new_collections_go() -> None:
    assert "kept in this computer's data folder" in server_status(None)
    chosen = server_status(ServerChoice("http://10.0.0.5:8000"))
    assert "made on the Chroma server `http://10.0.0.5:8000`" in chosen and "Use the data folder only" in chosen
    fixed = server_status(ServerChoice("http://10.0.0.9:8000", source="settings"))
    assert "as set where Hearth was started" in fixed and "Use the data folder only" not in fixed
