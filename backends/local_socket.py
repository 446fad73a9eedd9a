"""Unix sockets in owner-only folders: where Hearth's own processes meet llama.cpp's RPC, which has no
authentication. A TCP port on loopback is open to every account on the computer; a socket inside a folder of mode
0700 can be reached only by the account that made the folder (and root). The folder's name is drawn at random by
``mkdtemp``, which creates it or fails: another account cannot make it first and hold it.

llama.cpp learned ``unix:PATH`` endpoints from Hearth's patch (``packaging/patches/ggml-rpc-unix-socket.patch``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from models.shared.errors import HearthError

SCHEME = "unix:"
# sockaddr_un's sun_path holds 108 bytes on Linux (104 on macOS), the terminating zero included
MAX_PATH_BYTES = 100
SOCKET_NAME = "rpc.sock"


class PrivateFolderError(HearthError):
    """No owner-only folder could be made for a socket."""


@dataclass(frozen=True)
class LocalSocket:
    """A Unix socket's path; as text, the endpoint llama.cpp takes for it."""

    path: Path

    def __str__(self) -> str:
        return f"{SCHEME}{self.path}"


def parse_local(text: str) -> LocalSocket | None:
    """The socket ``unix:PATH`` names, or None for any other address."""
    if not text.startswith(SCHEME) or len(text) == len(SCHEME):
        return None
    return LocalSocket(Path(text.removeprefix(SCHEME)))


def runtime_base() -> Path | None:
    """Where private folders go: the per-user runtime folder (``XDG_RUNTIME_DIR``, made by the login manager for
    this account alone) when it is there, owned by this account and closed to others; otherwise the system's
    temporary folder (None), where the random name and mode 0700 keep the folder private."""
    named = os.environ.get("XDG_RUNTIME_DIR", "")
    if not named:
        return None
    try:
        found = os.lstat(named)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        return None
    return Path(named)


def private_folder(prefix: str) -> Path:
    """A new folder that only this account may enter, with a name short enough for a socket inside it. Folders of
    the same prefix that a killed process left behind (this account's, with nothing listening in them) go first."""
    remove_stale(prefix)
    reason = "its path would be too long for a socket"
    for base in (runtime_base(), None):
        try:
            folder = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        except OSError as exc:
            reason = exc.strerror or str(exc)
            continue
        if len(os.fsencode(folder / SOCKET_NAME)) <= MAX_PATH_BYTES:
            return folder
        folder.rmdir()
    raise PrivateFolderError(
        f"Hearth could not make a private folder for its sockets ({reason}).",
        "Set TMPDIR to a short folder you can write to (for example /tmp) and try again.",
    )


STALE_AFTER_S = 60.0  # a younger folder may be one a process of ours is about to listen in


def remove_stale(prefix: str) -> None:
    """Removes this account's folders of ``prefix`` in which no socket is bound any more (Linux lists the bound
    ones in /proc/net/unix; elsewhere nothing is removed)."""
    try:
        bound = {
            line.split()[-1] for line in Path("/proc/net/unix").read_text().splitlines()[1:] if len(line.split()) > 7
        }
    except OSError:
        return
    now = time.time()
    for base in (runtime_base(), Path(tempfile.gettempdir())):
        if base is None:
            continue
        with contextlib.suppress(OSError):
            for folder in base.glob(f"{prefix}*"):
                found = os.lstat(folder)
                if (
                    not stat.S_ISDIR(found.st_mode)
                    or found.st_uid != os.getuid()
                    or now - found.st_mtime < STALE_AFTER_S
                ):
                    continue
                if not any(str(entry) in bound for entry in folder.iterdir()):
                    remove_folder(folder)


def remove_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        shutil.rmtree(folder)


def listen(path: Path, backlog: int = 8) -> socket.socket:
    """A listening Unix socket at ``path`` (inside a private folder)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        server.listen(backlog)
    except OSError:
        server.close()
        raise
    return server


def connect(where: LocalSocket, timeout_s: float) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(timeout_s)
    try:
        client.connect(str(where.path))
    except OSError:
        client.close()
        raise
    client.settimeout(None)
    return client


def peer_credentials(connection: socket.socket) -> tuple[int, int]:
    """The process id and user id of whoever is at the other end of a Unix socket connection, as the kernel
    recorded them when that end connected ((0, -1) where the system does not say)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return 0, -1
    raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return int(pid), int(uid)


def peer_process(connection: socket.socket) -> int:
    """The process id of whoever is at the other end of a Unix socket connection (0 where the system does not
    say)."""
    return peer_credentials(connection)[0]
