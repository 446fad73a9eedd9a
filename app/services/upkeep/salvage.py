"""Rows that can still be read from a damaged SQLite file, table by table and rowid range by rowid range.

SQLite stores a table as a tree of pages keyed by rowid. A damaged page makes every read that touches it fail, but
the rows on the other pages are intact: reading a range of rowids, and splitting a range that fails in halves until
the failing rows are isolated, gets back every row on an undamaged page. The search
(:func:`salvage_range`) is pure, over a read function; :func:`read_table` applies it to a real file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_READS = 20_000  # per table: enough to isolate thousands of damaged pages, bounded when the whole tree is gone
LARGEST_ROWID = 2**63 - 1

Row = tuple[Any, ...]
ReadRange = Callable[[int, int], list[Row]]


@dataclass
class Salvaged:
    rows: list[Row] = field(default_factory=list)
    lost: list[tuple[int, int]] = field(default_factory=list)  # inclusive rowid ranges that could not be read
    reads: int = 0

    def lose(self, low: int, high: int) -> None:
        if self.lost and self.lost[-1][1] + 1 >= low:
            self.lost[-1] = (self.lost[-1][0], max(high, self.lost[-1][1]))
        else:
            self.lost.append((low, high))


def salvage_range(read: ReadRange, low: int, high: int, max_reads: int = MAX_READS) -> Salvaged:
    """Every row with a rowid in ``low..high`` that ``read`` can return. ``read(a, b)`` returns the rows with rowids
    ``a..b`` or raises ``sqlite3.DatabaseError``; ranges that fail even alone (or once ``max_reads`` is spent) are
    reported in ``lost``, merged where they touch."""
    result = Salvaged()
    # Depth-first, lowest rowids first, so rows and lost ranges come out in order. Each damaged page costs about
    # two reads per halving (some 130 for the widest span), so the search stays small however big the table.
    pending = [(low, high)]
    while pending:
        start, end = pending.pop()
        if result.reads >= max_reads:
            result.lose(start, end)
            continue
        result.reads += 1
        try:
            result.rows.extend(read(start, end))
        except sqlite3.DatabaseError:
            if start == end:
                result.lose(start, end)
                continue
            middle = start + (end - start) // 2
            pending.append((middle + 1, end))
            pending.append((start, middle))
    return result


def open_damaged(path: Path) -> sqlite3.Connection:
    """A read-only connection to a (copy of a) damaged database; damaged text comes back with U+FFFD in place of
    the bytes that are not UTF-8 instead of failing the whole row."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.text_factory = lambda raw: raw.decode("utf-8", "replace")
    return db


def table_names(db: sqlite3.Connection) -> set[str] | None:
    """The tables the file defines, or None when even its schema cannot be read."""
    try:
        return {str(row[0]) for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError:
        return None


def table_columns(db: sqlite3.Connection, table: str) -> list[str] | None:
    """The columns of ``table``, or None when the schema cannot be read or has no such table."""
    try:
        rows = db.execute(f'PRAGMA table_info("{table}")').fetchall()
    except sqlite3.DatabaseError:
        return None
    return [str(row[1]) for row in rows] or None


def largest_rowid(db: sqlite3.Connection, table: str) -> int:
    """The table's largest rowid if SQLite can still find it (the tree's rightmost path, or the AUTOINCREMENT
    counter), else the largest possible one."""
    for sql, parameters in (
        (f'SELECT MAX(rowid) FROM "{table}"', ()),
        ("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)),
    ):
        try:
            row = db.execute(sql, parameters).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None and row[0] is not None:
            return int(row[0])
    return LARGEST_ROWID


def read_table(db: sqlite3.Connection, table: str, columns: Sequence[str]) -> Salvaged:
    """Every readable row of ``table`` (rowid first, then ``columns``)."""
    names = ", ".join(f'"{c}"' for c in columns)
    sql = f'SELECT rowid, {names} FROM "{table}" NOT INDEXED WHERE rowid BETWEEN ? AND ? ORDER BY rowid'

    def read(low: int, high: int) -> list[Row]:
        return db.execute(sql, (low, high)).fetchall()

    top = largest_rowid(db, table)
    return salvage_range(read, 1, top) if top >= 1 else Salvaged()
