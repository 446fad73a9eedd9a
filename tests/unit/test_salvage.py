"""The search for readable rows in a damaged table, over a read function that fails like SQLite does."""

from __future__ import annotations

import sqlite3

import pytest

from app.services.upkeep.salvage import LARGEST_ROWID, ReadRange, Row, salvage_range


def reader(rowids: range, damaged: set[int]) -> ReadRange:
    """A table of ``rowids`` in which any read touching a ``damaged`` rowid fails, as a damaged page does."""

    def read(low: int, high: int) -> list[Row]:
        if any(low <= rowid <= high for rowid in damaged):
            raise sqlite3.DatabaseError("database disk image is malformed")
        return [(rowid, f"row {rowid}") for rowid in rowids if low <= rowid <= high]

    return read


@pytest.mark.parametrize(
    ("damaged", "lost"),
    [
        (set(), []),
        ({7}, [(7, 7)]),
        (set(range(40, 61)), [(40, 60)]),
        ({1, 2, 99, 100}, [(1, 2), (99, 100)]),
    ],
)
def test_every_row_outside_the_damage_is_kept(damaged: set[int], lost: list[tuple[int, int]]) -> None:
    result = salvage_range(reader(range(1, 101), damaged), 1, 100)
    assert [row[0] for row in result.rows] == [r for r in range(1, 101) if r not in damaged]
    assert result.lost == lost


def test_an_unknown_upper_bound_costs_few_reads() -> None:
    """With no usable largest rowid the whole 64-bit span is searched by halving: one damaged row costs about two
    reads per halving, not one read per possible rowid."""
    result = salvage_range(reader(range(1, 5001), {2500}), 1, LARGEST_ROWID)
    assert len(result.rows) == 4999
    assert result.lost == [(2500, 2500)]
    assert result.reads < 200


def test_a_table_that_cannot_be_read_at_all_stops_at_the_budget() -> None:
    def read(low: int, high: int) -> list[Row]:
        raise sqlite3.DatabaseError("file is not a database")

    result = salvage_range(read, 1, LARGEST_ROWID, max_reads=50)
    assert result.rows == []
    assert result.reads == 50
    assert result.lost[0][0] == 1 and result.lost[-1][1] == LARGEST_ROWID
