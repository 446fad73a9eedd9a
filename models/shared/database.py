"""A small SQLite wrapper shared by Hearth's stores: WAL mode, one lock, one transaction per change, and
errors that say what to do. A database that cannot be opened is never deleted or rewritten.

A damaged database (SQLite reports it corrupt, or it is not a database at all) does not stop Hearth from
starting: the store opens in a damaged state, and every use of it raises :class:`DamagedStore`, naming the file
and `hearth repair`, while the rest of Hearth keeps working. Nothing is written into a damaged file (writing into
a broken tree can spread the damage); `hearth repair` sets it aside and rebuilds from what can still be read.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from models.shared.errors import DiskFull, StorageError
from models.shared.private_files import create_private_file

# SQLite's primary result codes for a damaged file (the extended codes keep these in their low byte), and for a
# full disk.
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_NOTADB = 26
# A library that reports a failed write only as text (Chroma's Rust core) is taken to have met a full disk when
# less than this is left on the disk it writes to.
LOW_SPACE_BYTES = 32 << 20
DETAIL_CHARS = 160
REPAIR_REMEDY = (
    "Stop Hearth and run `hearth repair`: it sets the damaged file aside (it deletes nothing) and rebuilds the store "
    "with everything it can still read."
)


# What the page says instead: a damaged database is repaired when Hearth starts (app.services.upkeep.repair).
REPAIR_AT_START = (
    "Quit Hearth and start it again: as it starts, it sets the damaged file aside (it deletes nothing) and rebuilds "
    "the store with everything it can still read."
)


class DamagedStore(StorageError):
    """One of Hearth's stores is damaged on disk: ``store`` says which ("conversation database", "documents
    vector store", …) and ``path`` where it is."""

    def __init__(
        self, message: str, remedy: str, store: str, path: Path, detail: str = "", page_remedy: str | None = None
    ) -> None:
        super().__init__(message, remedy, page_remedy)
        self.store = store
        self.path = path
        self.detail = detail  # what the library reported, for `hearth repair`'s own report


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether SQLite says the file itself is damaged (as opposed to busy, full, read-only or missing)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)


def is_disk_full(exc: BaseException, folder: Path | None = None) -> bool:
    """Whether ``exc`` (or what caused it) is a full disk: ENOSPC or EDQUOT from the system, SQLITE_FULL from
    SQLite; or, given the ``folder`` written to, any error while that disk has almost no space left."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        code = getattr(seen, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF == SQLITE_FULL:
            return True
        seen = seen.__cause__ or seen.__context__
    return folder is not None and free_bytes(folder) < LOW_SPACE_BYTES


def free_bytes(folder: Path) -> int:
    """Space left for this user on the disk that holds ``folder`` (or its nearest existing parent)."""
    for candidate in (folder, *folder.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return 1 << 62  # nothing could be measured: never call that a full disk


def disk_full(what: str, folder: Path) -> DiskFull:
    """The error every front end shows when a store could not be written for lack of space."""
    free = free_bytes(folder)
    left = f"{free / (1 << 20):.0f} MB" if free < (1 << 62) else "unknown"
    return DiskFull(
        f"The disk that holds {folder} is full (free now: {left}), so the {what} could not be written. Nothing "
        "stored was lost or damaged; what was being added was not kept.",
        "Free some space on that disk (delete files you no longer need, empty the trash), then try again.",
    )


def _is_storage(exc: sqlite3.DatabaseError) -> bool:
    """A problem with the file or the disk, not with Hearth's own SQL (a constraint Hearth relies on stays raw)."""
    return is_damage(exc) or isinstance(exc, sqlite3.OperationalError)


def first_problem(db: sqlite3.Connection) -> str | None:
    """SQLite's quick check of every page (about 10 ms per MB): None when the file is sound, else its first
    complaint. Raises what SQLite raises when even the check cannot run."""
    return first_complaint(db.execute("PRAGMA quick_check").fetchall())


def first_complaint(rows: list[Any]) -> str | None:
    """The first problem in the rows of an integrity or quick check, or None when it says "ok"."""
    problems = [str(row[0]) for row in rows if row[0] != "ok"]
    if not problems:
        return None
    # SQLite heads its report with "*** in database main ***"; the first real complaint follows.
    lines = [line for text in problems for line in text.splitlines() if line.strip() and not line.startswith("***")]
    return lines[0] if lines else problems[0]


def damaged(what: str, path: Path, detail: str, meanwhile: str = "", repaired_at_start: bool = False) -> DamagedStore:
    """The error every front end shows for a damaged store (the page as a dialog, the CLI as a message);
    ``repaired_at_start`` for the stores that `hearth ui` repairs as it starts (the page then says to restart)."""
    detail = " ".join(detail.split())[:DETAIL_CHARS]
    remedy = f"{REPAIR_REMEDY} {meanwhile}".strip()
    page = f"{REPAIR_AT_START} {meanwhile}".strip() if repaired_at_start else None
    message = f"The {what} {path} is damaged ({detail}). Hearth has not changed it."
    return DamagedStore(message, remedy, what, path, detail, page)


class Database:
    def __init__(
        self,
        path: Path,
        schema: str,
        schema_version: int,
        what: str,
        fresh_start: str,
        migrations: Mapping[int, str] | None = None,
        meanwhile: str = "",
    ) -> None:
        """``schema`` creates the first version's tables; ``migrations`` maps each later version to the SQL that
        brings the previous one up to it, so new and old databases end up with the same tables. ``what`` names
        the database in messages ("conversation database"); ``fresh_start`` says what the user loses by moving an
        unopenable one aside; ``meanwhile`` says what still works while it is damaged."""
        self.path = path
        self.what = what
        self._meanwhile = meanwhile
        self._lock = threading.Lock()
        self._damage: str | None = None
        create_private_file(path)  # owner-only, and SQLite gives its side files (-wal, -shm) the same mode
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            # Checked before anything is written: a damaged file is left exactly as it was found.
            problem = first_problem(self._db)
            if problem is not None:
                self._set_damaged(problem)
                return
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA synchronous=NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > schema_version:
                raise StorageError(
                    f"{path} was written by a newer Hearth (schema {version}).",
                    "Upgrade Hearth, or set HEARTH_HOME to another folder.",
                )
            self._db.executescript(schema)
            for target in sorted(v for v in (migrations or {}) if version < v <= schema_version):
                # One transaction per step: a crash mid-upgrade leaves the previous version, which upgrades again.
                self._db.executescript(f"BEGIN; {(migrations or {})[target]}; PRAGMA user_version={target}; COMMIT;")
            self._db.execute(f"PRAGMA user_version={schema_version}")
        except sqlite3.DatabaseError as exc:
            if is_disk_full(exc, path.parent):  # SQLite may say only "disk I/O error" when it cannot grow a file
                raise disk_full(what, path.parent) from exc
            if is_damage(exc):
                self._set_damaged(str(exc))
                return
            raise StorageError(
                f"The {what} {path} cannot be opened ({exc}). Hearth has not changed it.",
                f"Check that you may read and write {path.parent}, or move the file aside (for example to "
                f"{path.name}.broken) {fresh_start}, or restore a backup.",
            ) from exc

    @property
    def damage(self) -> DamagedStore | None:
        """Why this database cannot be used, if it is damaged."""
        if self._damage is None:
            return None
        return damaged(self.what, self.path, self._damage, self._meanwhile, repaired_at_start=True)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._refuse_if_damaged()
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                if not _is_storage(exc):
                    raise
                raise self._translate(exc, "write to") from exc

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads; no write from this process lands between reads made inside one ``with``."""
        with self._lock:
            self._refuse_if_damaged()
            try:
                yield self._db
            except sqlite3.DatabaseError as exc:
                if not _is_storage(exc):
                    raise
                raise self._translate(exc, "read") from exc

    def rows(self, sql: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
        with self.reading() as db:
            return db.execute(sql, parameters).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _set_damaged(self, detail: str) -> None:
        self._damage = detail
        self._db.close()  # nothing more is read from or written to it

    def _refuse_if_damaged(self) -> None:
        error = self.damage
        if error is not None:
            raise error

    def _translate(self, exc: sqlite3.DatabaseError, verb: str) -> StorageError:
        if is_disk_full(exc, self.path.parent):
            return disk_full(self.what, self.path.parent)
        if is_damage(exc):
            # Found in use (the file was damaged after Hearth opened it): stop writing into it from now on.
            self._set_damaged(str(exc))
            return damaged(self.what, self.path, str(exc), self._meanwhile)
        return StorageError(f"Could not {verb} {self.path}: {exc}.", "Check free disk space and folder permissions.")
