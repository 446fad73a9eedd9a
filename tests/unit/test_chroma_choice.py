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
        choose(path, "http://127.0.0.1:8000", token_file=str(loose), token_folder=tmp_path)
    assert "token" in refused.value.message.lower() and "outside" not in refused.value.message
    assert not path.exists()


def test_the_page_sends_only_a_token_kept_in_the_data_folder(tmp_path: Path) -> None:
    from app.paths import resolve_data_paths

    paths = resolve_data_paths(tmp_path / "home")
    paths.root.mkdir(parents=True)
    elsewhere = tmp_path / "other-program-key"  # one line, owner-only: it would pass every other check
    elsewhere.write_text("sk-another-programs-key\n")
    elsewhere.chmod(0o600)
    through_a_link = paths.root / "token-link"
    through_a_link.symlink_to(elsewhere)
    for named in (str(elsewhere), str(through_a_link), str(paths.root / ".." / "other-program-key")):
        with pytest.raises(ChromaServerSettingError) as refused:
            choose(
                paths.chroma_server_file,
                "https://10.0.0.5:443",
                named,
                hearths_own=paths.hearths_own(),
                token_folder=paths.root,
            )
        assert "outside Hearth's data folder" in refused.value.message
        assert str(paths.root) in refused.value.remedy and "rag.chroma_token_file" in refused.value.remedy
        assert str(paths.root) in refused.value.page_remedy and "rag.chroma_token_file" not in refused.value.page_remedy
    assert not paths.chroma_server_file.exists()


def test_the_section_says_where_new_collections_go() -> None:
    assert "kept in this computer's data folder" in server_status(None)
    chosen = server_status(ServerChoice("http://10.0.0.5:8000"))
    assert "made on the Chroma server `http://10.0.0.5:8000`" in chosen and "Use the data folder only" in chosen
    fixed = server_status(ServerChoice("http://10.0.0.9:8000", source="settings"))
    assert "as set where Hearth was started" in fixed and "Use the data folder only" not in fixed
    assert "unencrypted" in chosen  # http:// to another computer
    assert "unencrypted" not in server_status(ServerChoice("http://127.0.0.1:8000"))
    assert "unencrypted" not in server_status(ServerChoice("https://10.0.0.5:443"))


def test_hearths_own_files_are_refused_as_a_token_before_anything_is_sent(tmp_path: Path) -> None:
    from app.paths import resolve_data_paths

    paths = resolve_data_paths(tmp_path / "home")
    paths.root.mkdir(parents=True)
    paths.api_key_file.write_text("hearth-the-api-key\n")
    paths.api_key_file.chmod(0o600)
    for named in (str(paths.api_key_file), str(paths.root / "cache" / ".." / "api-key")):
        with pytest.raises(ChromaServerSettingError) as refused:
            choose(paths.chroma_server_file, "https://10.0.0.5:443", named, hearths_own=paths.hearths_own())
        assert "one of Hearth's own files" in refused.value.message
    assert not paths.chroma_server_file.exists()


def test_connect_is_refused_to_a_page_opened_elsewhere() -> None:
    import gradio as gr

    from app.ui.chroma_server_section import ONLY_HERE, ServerSection

    class _Client:
        host = "192.168.1.20"

    class _Request:
        client = _Client()

    section = ServerSection.__new__(ServerSection)  # refused before the section touches any service
    with pytest.raises(gr.Error) as refused:
        section.connect("http://10.0.0.5:8000", "/home/me/.ssh/id_ed25519", "", None, None, _Request())  # type: ignore[arg-type]
    assert ONLY_HERE in str(refused.value)
