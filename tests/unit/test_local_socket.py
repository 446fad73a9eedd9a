"""Private folders for Hearth's sockets: made with a random name and mode 0700 (in the per-user runtime folder when
it is the account's own), endpoints llama.cpp reads as ``unix:PATH``, and what a killed process left behind
cleared without touching a folder in use."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.local_socket import (
    SOCKET_NAME,
    STALE_AFTER_S,
    LocalSocket,
    listen,
    parse_local,
    peer_process,
    private_folder,
    runtime_base,
)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder of its own with a short path: a socket's path is at most about 100 bytes, and pytest's folders
    (longer again in a parallel worker's) can be longer than that."""
    folder = Path(tempfile.mkdtemp(prefix="hs-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def temporary(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    return short_tmp


def test_endpoints_read_back() -> None:
    where = LocalSocket(Path("/run/user/1000/hearth-worker-x/rpc.sock"))
    assert str(where) == "unix:/run/user/1000/hearth-worker-x/rpc.sock"
    assert parse_local(str(where)) == where
    assert parse_local("127.0.0.1:50052") is None and parse_local("unix:") is None


def test_a_private_folder_is_new_owner_only_and_short_enough(temporary: Path) -> None:
    first, second = private_folder("hearth-test-"), private_folder("hearth-test-")
    assert first != second and first.parent == temporary
    assert first.stat().st_mode & 0o777 == 0o700 and first.stat().st_uid == os.getuid()
    assert len(os.fsencode(first / SOCKET_NAME)) <= 100


def test_the_runtime_folder_is_used_only_when_it_is_this_accounts_alone(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = short_tmp / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert runtime_base() == runtime and private_folder("hearth-test-").parent == runtime
    runtime.chmod(0o755)  # others may enter: not a private base
    assert runtime_base() is None
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_tmp / "missing"))
    assert runtime_base() is None


def test_folders_a_killed_process_left_are_cleared_and_those_in_use_kept(temporary: Path) -> None:
    old = time.time() - STALE_AFTER_S - 10
    left = temporary / "hearth-test-left"
    left.mkdir(mode=0o700)
    (left / SOCKET_NAME).write_text("")  # nothing bound there
    os.utime(left, (old, old))
    used = temporary / "hearth-test-used"
    used.mkdir(mode=0o700)
    server = listen(used / SOCKET_NAME)
    os.utime(used, (old, old))
    young = temporary / "hearth-test-young"
    young.mkdir(mode=0o700)  # about to be listened in by a process starting now
    try:
        made = private_folder("hearth-test-")
        assert not left.exists() and used.exists() and young.exists() and made.exists()
    finally:
        server.close()


def test_the_peer_of_a_connection_is_named_by_the_kernel(temporary: Path) -> None:
    folder = private_folder("hearth-test-")
    server = listen(folder / SOCKET_NAME)
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(folder / SOCKET_NAME))
            accepted, _ = server.accept()
            with accepted:
                assert peer_process(accepted) == os.getpid()
    finally:
        server.close()
