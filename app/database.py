"""A small SQLite wrapper shared by Hearth's stores: WAL mode, one lock, one transaction per change, and
errors that say what to do. A database that cannot be opened is never deleted or rewritten."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.errors import StorageError


class Database:
    def __init__(
        self,
        path: Path,
        schema: str,
        schema_version: int,
        what: str,
        fresh_start: str,
        migrations: Mapping[int, str] | None = None,
    ) -> None:
        """``schema`` creates the first version's tables; ``migrations`` maps each later version to the SQL that
        brings the previous one up to it, so new and old databases end up with the same tables. ``what`` names
        the database in messages ("conversation database"); ``fresh_start`` says what the user loses by moving a
        damaged one aside."""
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
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
            raise StorageError(
                f"The {what} {path} cannot be opened ({exc}). Hearth has not changed it.",
                f"Move it aside (for example to {path.name}.broken) {fresh_start}, or restore a backup.",
            ) from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                raise StorageError(
                    f"Could not write to {self.path}: {exc}.", "Check free disk space and folder permissions."
                ) from exc

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads; no write from this process lands between reads made inside one ``with``."""
        with self._lock:
            yield self._db

    def rows(self, sql: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
        with self.reading() as db:
            return db.execute(sql, parameters).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()
