"""The API key file: random, owner-only, made once, replaced by a rotation that a running server sees."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from app.api.keys import KEY_PREFIX, ApiKeyStore, KeyFileError
from app.paths import resolve_data_paths


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_key_is_made_on_first_use_readable_by_its_owner_only(isolated_home: Path) -> None:
    path = resolve_data_paths(isolated_home).api_key_file
    assert path.parent == isolated_home.resolve()
    key = ApiKeyStore(path).get()
    assert key.startswith(KEY_PREFIX) and len(key) > 40
    assert mode(path) == 0o600
    assert ApiKeyStore(path).get() == key  # a second process reads the same key
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


def test_every_installation_gets_its_own_key(tmp_path: Path) -> None:
    assert ApiKeyStore(tmp_path / "a" / "key").get() != ApiKeyStore(tmp_path / "b" / "key").get()


def test_rotating_replaces_the_key_and_other_readers_see_it(tmp_path: Path) -> None:
    server = ApiKeyStore(tmp_path / "key")
    old = server.get()
    new = ApiKeyStore(tmp_path / "key").rotate()  # `hearth api-key --rotate` in another process
    assert new != old
    assert server.get() == new  # the running server's cached key is dropped
    assert mode(tmp_path / "key") == 0o600


def test_loose_permissions_are_tightened(tmp_path: Path) -> None:
    store = ApiKeyStore(tmp_path / "key")
    key = store.get()
    (tmp_path / "key").chmod(0o644)
    assert ApiKeyStore(tmp_path / "key").get() == key
    assert mode(tmp_path / "key") == 0o600


def test_a_hand_written_key_is_used_and_a_damaged_file_says_how_to_recover(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text("my-own-long-enough-key-0123456789\n")
    path.chmod(0o600)
    assert ApiKeyStore(path).get() == "my-own-long-enough-key-0123456789"
    path.write_text("short\n")
    with pytest.raises(KeyFileError) as caught:
        ApiKeyStore(path).get()
    assert "--rotate" in caught.value.remedy
    assert ApiKeyStore(path).rotate().startswith(KEY_PREFIX)


def test_hearth_api_key_prints_the_key_and_rotate_replaces_it(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli.main import main

    assert main(["api-key"]) == 0
    first = capsys.readouterr().out.strip()
    assert first == ApiKeyStore(resolve_data_paths(isolated_home).api_key_file).get()
    assert main(["api-key"]) == 0
    assert capsys.readouterr().out.strip() == first
    assert main(["api-key", "--rotate"]) == 0
    rotated = capsys.readouterr()
    assert rotated.out.strip() != first and rotated.out.strip().startswith(KEY_PREFIX)
    assert "old key no longer works" in rotated.err
