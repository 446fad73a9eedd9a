"""One Hearth window per data folder: the first launch holds a lock and listens on a local socket; a later launch
finds the lock taken, asks the first to come to the front over the socket, and exits.

The socket lives in the owner-only data folder. When that path is too long for a Unix socket, the first instance makes
a private folder of its own (``backends/local_socket.py``: in the per-user runtime folder, or a new folder with a
random name under the temporary directory, which another account cannot make first) and writes its name in the data
folder, where a later launch reads it. The first instance answers only its own user (``SO_PEERCRED``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from app.paths import write_private_text
from backends.local_socket import MAX_PATH_BYTES, peer_credentials, private_folder, remove_folder
from models.shared.errors import HearthError

SHOW = b"show\n"
SHOWN = b"shown\n"
_ANSWER_WAIT_S = 5.0
_SOCKET_NAME = "desktop.sock"
_FOLDER_NOTE = "desktop-socket-folder"  # in the data folder: where a first instance with a long path listens


def socket_path(root: Path) -> Path | None:
    """Where the first instance listens, as a later launch finds it: in the data folder, or in the private folder
    the data folder names (None when it names none)."""
    inside = root / _SOCKET_NAME
    if _fits(inside):
        return inside
    try:
        named = (root / _FOLDER_NOTE).read_text().strip()
    except OSError:
        return None
    return Path(named) / _SOCKET_NAME if named else None


def _fits(path: Path) -> bool:
    return len(os.fsencode(path)) <= MAX_PATH_BYTES


def _own_private_folder(folder: Path) -> bool:
    try:
        found = os.lstat(folder)
    except OSError:
        return False
    return found.st_uid == os.getuid() and not found.st_mode & 0o077


class InstanceSocketError(HearthError):
    """The first instance's socket could not be made."""


class SingleInstance:
    """The lock of the data folder's window. :meth:`acquire` says whether this process is the first; the first
    then :meth:`serve`-s show requests, a later one calls :meth:`ask_to_show`."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._lock_path = root / "desktop.lock"
        self._socket_path: Path | None = None
        self._folder: Path | None = None  # the private folder this first instance made, if it made one
        self._lock_fd: int | None = None
        self._server: socket.socket | None = None
        self._stopped = threading.Event()

    def acquire(self) -> bool:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        try:
            path = self._listening_path()
            path.unlink(missing_ok=True)  # left by a first instance that was killed: the lock was free
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(str(path))
            path.chmod(0o600)
            server.listen(4)
        except OSError as exc:
            self.release()
            raise InstanceSocketError(
                f"Hearth could not listen for later launches of its window ({exc.strerror or exc}).",
                f"Check that you own {self._root} and can write to it, then start Hearth again.",
            ) from exc
        except BaseException:
            self.release()
            raise
        self._socket_path, self._server = path, server
        return True

    def _listening_path(self) -> Path:
        """The first instance's socket: in the data folder when its path fits, otherwise in a new private folder
        (the one a killed first instance left is removed) whose name goes in the data folder."""
        inside = self._root / _SOCKET_NAME
        if _fits(inside):
            return inside
        left = socket_path(self._root)
        if left is not None and _own_private_folder(left.parent):
            remove_folder(left.parent)
        self._folder = private_folder("hearth-desktop-")
        write_private_text(self._root / _FOLDER_NOTE, str(self._folder))
        return self._folder / _SOCKET_NAME

    def serve(self, on_show: Callable[[], None]) -> threading.Thread:
        """Answer show requests in a daemon thread, calling ``on_show`` for each, until :meth:`release`."""
        thread = threading.Thread(target=self._serve, args=(on_show,), name="desktop-single-instance", daemon=True)
        thread.start()
        return thread

    def _serve(self, on_show: Callable[[], None]) -> None:
        server = self._server
        if server is None:
            return
        while not self._stopped.is_set():
            try:
                client, _ = server.accept()
            except OSError:
                return  # closed by release()
            with client:
                client.settimeout(_ANSWER_WAIT_S)
                if not _same_user(client):
                    continue
                with contextlib.suppress(OSError):
                    if client.recv(len(SHOW)) == SHOW:
                        on_show()
                        client.sendall(SHOWN)

    def ask_to_show(self, wait_s: float = 10.0) -> bool:
        """Ask the first instance to bring its window to the front; True once it said it did. It is retried for
        ``wait_s``, as the first may hold the lock a moment before it listens."""
        deadline = time.monotonic() + wait_s
        while True:
            path = socket_path(self._root)  # read again: the first may not have written it yet
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(_ANSWER_WAIT_S)
                if path is None:
                    raise FileNotFoundError(self._root / _FOLDER_NOTE)
                client.connect(str(path))
                client.sendall(SHOW)
                if client.recv(len(SHOWN)) == SHOWN:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def release(self) -> None:
        self._stopped.set()
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        if self._socket_path is not None:
            self._socket_path.unlink(missing_ok=True)
            self._socket_path = None
        if self._folder is not None:
            remove_folder(self._folder)
            (self._root / _FOLDER_NOTE).unlink(missing_ok=True)
            self._folder = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None


def _same_user(client: socket.socket) -> bool:
    return peer_credentials(client)[1] == os.getuid()
