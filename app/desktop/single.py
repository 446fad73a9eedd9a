"""One Hearth window per data folder: the first launch holds a lock and listens on a local socket; a later launch
finds the lock taken, asks the first to come to the front over the socket, and exits.

The socket lives in the owner-only data folder (or, when that path is too long for a Unix socket, in an owner-only
folder under the temporary directory), and the first instance answers only its own user (``SO_PEERCRED``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

SHOW = b"show\n"
SHOWN = b"shown\n"
# sun_path holds 108 bytes on Linux, including the terminating NUL.
_MAX_SOCKET_PATH = 100
_ANSWER_WAIT_S = 5.0


def socket_path(root: Path) -> Path:
    """Where the first instance listens: in the data folder, or in an owner-only folder under the temporary
    directory (named after the data folder) when the data folder's path is too long for a socket."""
    inside = root / "desktop.sock"
    if len(os.fsencode(inside)) <= _MAX_SOCKET_PATH:
        return inside
    folder = Path(tempfile.gettempdir()) / f"hearth-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.stat().st_uid != os.getuid() or folder.stat().st_mode & 0o077:
        raise PermissionError(f"{folder} is not this user's own folder")
    return folder / f"{hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:16]}.sock"


class SingleInstance:
    """The lock of the data folder's window. :meth:`acquire` says whether this process is the first; the first
    then :meth:`serve`-s show requests, a later one calls :meth:`ask_to_show`."""

    def __init__(self, root: Path) -> None:
        self._lock_path = root / "desktop.lock"
        self._socket_path = socket_path(root)
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
        self._socket_path.unlink(missing_ok=True)  # left by a first instance that was killed: the lock was free
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self._socket_path))
        self._socket_path.chmod(0o600)
        server.listen(4)
        self._server = server
        return True

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
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(_ANSWER_WAIT_S)
                client.connect(str(self._socket_path))
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
            self._socket_path.unlink(missing_ok=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None


def _same_user(client: socket.socket) -> bool:
    credentials = client.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return int(uid) == os.getuid()
