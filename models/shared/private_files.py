"""Files only this account may read: created owner-only, or with the group's and others' permissions taken off.
A leaf of the lowest layer, so that the stores below the app (rag's, models') keep their files private too."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_FILE_MODE = 0o600


def create_private_file(path: Path) -> None:
    """Create ``path`` empty and owner-only if it is missing, else take others' permissions off it. Called before
    SQLite opens a database: SQLite gives the -wal, -shm and -journal files the database file's own mode."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        tighten(path)
    except OSError as exc:  # the caller's own open reports the problem with its remedy
        log.debug("could not create %s privately: %s", path, exc)
    else:
        os.close(descriptor)


def tighten(path: Path) -> None:
    """Take the group's and others' permissions off ``path`` (never through a symbolic link); best effort."""
    try:
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        if not stat.S_ISLNK(info.st_mode) and mode & 0o077:
            path.chmod(mode & ~0o077)
    except FileNotFoundError:
        return
    except OSError as exc:
        log.warning("could not make %s private: %s", path, exc.strerror or exc)
