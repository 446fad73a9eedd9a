"""The desktop window's single-instance socket, tried by another account (``setpriv`` to a throwaway one): in the
data folder, or, when that path is too long, in a private folder with a random name, it cannot even connect, so it
can neither bring the window forward nor learn it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.desktop.single import SingleInstance, socket_path
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration

CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    s.sendall(b"show\\n")
    print("ANSWERED", s.recv(16))
except OSError as exc:
    print("REFUSED", exc.errno)
"""


@pytest.mark.parametrize("deep", [False, True], ids=["in-data-folder", "private-folder"])
def test_another_account_cannot_reach_the_windows_socket(
    other_account: tuple[int, int], open_folder: Path, deep: bool
) -> None:
    root = open_folder / ("d" * 120) if deep else open_folder
    root.mkdir(exist_ok=True)
    root.chmod(0o755)  # even with the data folder open to others (it is 0700 in use), the socket is not theirs
    first = SingleInstance(root)
    assert first.acquire()
    shown: list[bool] = []
    try:
        first.serve(lambda: shown.append(True))
        path = socket_path(root)
        assert path is not None
        tried = as_other(other_account, "/usr/bin/python3", "-c", CONNECT, str(path))
        assert tried.stdout.startswith("REFUSED 13"), tried.stdout + tried.stderr  # EACCES
        assert not shown
        assert SingleInstance(root).ask_to_show(wait_s=5)  # the owner's second launch still gets through
    finally:
        first.release()
