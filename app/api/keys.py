"""The installation's API key: random, kept in the data directory, readable by its owner only, made on first use.

The running server reads the key through :class:`ApiKeyStore` on every request, re-reading the file only when it
changed on disk, so ``hearth api-key --rotate`` in a terminal takes effect at once: the old key stops working.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import threading
from pathlib import Path

from models.shared.errors import HearthError, StorageError

KEY_PREFIX = "hearth-"
KEY_RANDOM_BYTES = 32  # 256 bits from the operating system's CSPRNG
# What a hand-edited key file may hold: something a client can put in a header, and long enough not to guess.
_VALID_KEY = re.compile(r"^[A-Za-z0-9._~+/=-]{24,256}$")
OWNER_ONLY = 0o600


class KeyFileError(HearthError):
    """The key file exists but does not hold a usable key."""


def new_key() -> str:
    return f"{KEY_PREFIX}{secrets.token_urlsafe(KEY_RANDOM_BYTES)}"


class ApiKeyStore:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._cached: tuple[tuple[int, int, int], str] | None = None

    @property
    def path(self) -> Path:
        return self._path

    def get(self) -> str:
        """The key, made now if there is none yet."""
        with self._lock:
            try:
                return self._read()
            except FileNotFoundError:
                self._write(new_key(), replace=False)
                return self._read()
            except OSError as exc:
                raise self._storage_error("read", exc) from exc

    def rotate(self) -> str:
        """Replace the key; clients holding the old one are refused from now on."""
        with self._lock:
            self._write(new_key(), replace=True)
            try:
                return self._read()
            except OSError as exc:
                raise self._storage_error("read", exc) from exc

    def _read(self) -> str:
        info = self._path.stat()
        identity = (info.st_mtime_ns, info.st_ino, info.st_size)
        if self._cached is not None and self._cached[0] == identity:
            return self._cached[1]
        if stat.S_IMODE(info.st_mode) & 0o077:
            # Copied or restored with loose permissions: other users of this machine could read it.
            self._path.chmod(OWNER_ONLY)
        key = self._path.read_text(encoding="utf-8").strip()
        if not _VALID_KEY.match(key):
            raise KeyFileError(
                f"The API key file {self._path} does not hold a usable key.",
                "Make a new key with `hearth api-key --rotate`.",
                page_remedy="Press Replace key in the API section of the Hardware tab to make a new one.",
            )
        self._cached = (identity, key)
        return key

    def _write(self, key: str, replace: bool) -> None:
        """Write through a private temporary file, so no reader ever sees half a key or a readable file.
        Without ``replace``, a key another process wrote first wins (two first starts at once agree)."""
        temporary = self._path.with_name(f".{self._path.name}.{secrets.token_hex(6)}")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OWNER_ONLY)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(f"{key}\n")
            if replace:
                temporary.replace(self._path)
            else:
                try:
                    os.link(temporary, self._path)
                except FileExistsError:
                    pass
                except OSError:
                    # No hard links on this file system (some network or FAT ones): no race protection, still a key.
                    if not self._path.exists():
                        temporary.replace(self._path)
        except OSError as exc:
            raise self._storage_error("write", exc) from exc
        finally:
            temporary.unlink(missing_ok=True)

    def _storage_error(self, verb: str, exc: OSError) -> StorageError:
        return StorageError(
            f"Cannot {verb} the API key file {self._path}: {exc.strerror or exc}.",
            "Check that the data directory belongs to you, or set HEARTH_HOME to a folder you can write to.",
        )
