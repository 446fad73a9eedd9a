"""Which errors are a full disk (models.shared.database.is_disk_full), and what the user is told."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from models.shared.database import SQLITE_FULL, disk_full, is_disk_full


def sqlite_error(code: int) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


def test_the_system_and_sqlite_say_full_in_their_codes() -> None:
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert is_disk_full(sqlite_error(SQLITE_FULL))
    assert is_disk_full(sqlite_error(SQLITE_FULL | (1 << 8)))  # an extended code keeps the primary one low
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(sqlite_error(11))  # corrupt is damage, not a full disk


def test_a_full_disk_is_found_behind_the_error_that_wraps_it() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("Chroma: write failed") from inner
    except RuntimeError as outer:
        assert is_disk_full(outer)


def test_text_only_errors_count_as_full_only_when_the_disk_is(tmp_path: Path) -> None:
    # tmp_path's disk has room: an error that says nothing typed is not called a full disk.
    assert not is_disk_full(RuntimeError("database or disk is full"), tmp_path)
    assert not is_disk_full(RuntimeError("anything"), tmp_path / "not" / "made" / "yet")


def test_the_message_names_the_folder_and_what_to_free(tmp_path: Path) -> None:
    error = disk_full("documents vector store", tmp_path)
    assert str(tmp_path) in error.message and "is full" in error.message and "free now" in error.message
    assert "Free some space" in error.remedy
