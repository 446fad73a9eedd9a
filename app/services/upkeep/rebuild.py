"""Setting a damaged store aside and rebuilding a SQLite database from the rows that can still be read.

A damaged file is only ever renamed (with SQLite's side files, so the set stays openable for a specialist tool),
never changed or deleted; the rows are read from a temporary copy of it. The new database is built under a
temporary name and renamed into place last, so an interrupted repair leaves either the damaged file or the new
one where Hearth looks, never half of one.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.services.upkeep.salvage import LARGEST_ROWID, Salvaged, open_damaged, read_table, table_columns, table_names

SIDE_FILES = ("-wal", "-shm", "-journal")


def repair_stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def set_aside(path: Path, stamp: str) -> Path:
    """Rename ``path`` (a file with its SQLite side files, or a folder) to ``NAME.damaged-STAMP``; return it."""
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    number = 2
    while target.exists():
        target = path.with_name(f"{path.name}.damaged-{stamp}-{number}")
        number += 1
    path.rename(target)
    for side in SIDE_FILES:
        companion = path.with_name(path.name + side)
        if companion.exists():
            companion.rename(target.with_name(target.name + side))
    return target


@dataclass
class TableSalvage:
    table: str
    kept: int = 0
    rejected: int = 0  # read, but too garbled to satisfy the table's constraints
    lost: list[tuple[int, int]] = field(default_factory=list)
    unreadable: bool = False  # not even the table's definition could be read

    @property
    def complete(self) -> bool:
        return not (self.lost or self.rejected or self.unreadable)

    def describe_loss(self) -> str:
        if self.unreadable:
            return f"table {self.table}: nothing could be read"
        parts = []
        for low, high in self.lost:
            if high >= LARGEST_ROWID:
                parts.append(f"rows from rowid {low} on")
            elif low == high:
                parts.append(f"row {low}")
            else:
                parts.append(f"rows {low}–{high} (up to {high - low + 1})")
        if self.rejected:
            parts.append(f"{self.rejected} garbled rows")
        return f"table {self.table}: could not read " + ", ".join(parts)


def rebuild_database(
    damaged: Path,
    target: Path,
    create: Callable[[Path], None],
    tables: Sequence[str],
    fix: Callable[[sqlite3.Connection], None] | None = None,
) -> list[TableSalvage]:
    """Build a new database at ``target`` (``create`` makes its empty, current schema) holding every readable row
    of ``tables`` from ``damaged``, columns matched by name; ``fix`` then restores what the schema needs (a row
    that other rows refer to, say). ``damaged`` is not touched: rows are read from a copy."""
    partial = target.with_name(f".{target.name}.rebuilding")
    for leftover in (partial, *(partial.with_name(partial.name + side) for side in SIDE_FILES)):
        leftover.unlink(missing_ok=True)
    create(partial)
    with tempfile.TemporaryDirectory(prefix="hearth-repair-") as scratch:
        copy = Path(scratch) / damaged.name
        shutil.copyfile(damaged, copy)
        for side in SIDE_FILES[:1]:  # the write-ahead log holds committed changes not yet in the main file
            if damaged.with_name(damaged.name + side).exists():
                shutil.copyfile(damaged.with_name(damaged.name + side), copy.with_name(copy.name + side))
        source = open_damaged(copy)
        new = sqlite3.connect(partial, isolation_level=None)
        try:
            new.execute("BEGIN")
            present = table_names(source)
            # A table the damaged file never had (written by an older Hearth) is not a loss.
            results = [_copy_table(source, new, table) for table in tables if present is None or table in present]
            if fix is not None:
                fix(new)
            new.execute("COMMIT")
        finally:
            new.close()
            source.close()
    partial.replace(target)
    return results


def _copy_table(source: sqlite3.Connection, new: sqlite3.Connection, table: str) -> TableSalvage:
    result = TableSalvage(table)
    have = table_columns(source, table)
    want = table_columns(new, table)
    if have is None or want is None:
        result.unreadable = have is None
        return result
    columns = [c for c in want if c in have]
    salvaged: Salvaged = read_table(source, table, columns)
    result.lost = salvaged.lost
    # The table's own rowid is kept too (it orders conversations of equal time), unless a column is the rowid.
    keep_rowid = not _has_rowid_column(new, table)
    names = (["rowid"] if keep_rowid else []) + [f'"{c}"' for c in columns]
    insert = f'INSERT INTO "{table}" ({", ".join(names)}) VALUES ({", ".join("?" * len(names))})'
    for row in salvaged.rows:
        try:
            new.execute(insert, row if keep_rowid else row[1:])
            result.kept += 1
        except sqlite3.DatabaseError:  # garbled values that break a constraint (or a duplicate key)
            result.rejected += 1
    return result


def _has_rowid_column(db: sqlite3.Connection, table: str) -> bool:
    keys = [row for row in db.execute(f'PRAGMA table_info("{table}")').fetchall() if row[5]]
    return len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER"
