"""The rows of a CSV file as sections, each row one passage that names its columns.

A row reads "version: 6.06 LTS; codename: Dapper Drake; …" on one line (empty cells left out), so that a question
naming a value and a column finds it by keyword and by meaning alike, and its section is the row's first value
("version: 6.06 LTS") rather than a row number a person cannot place. The first row is the header; a row longer
than the header names its extra cells "column N".
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence

from rag.reading.clean_text import clean_line
from rag.reading.sections import Section, Skipped, TextBudget, heading_text


def csv_sections(lines: Iterable[str], budget: TextBudget) -> list[Section]:
    # Row by row: every row repeats the column names, so a small file of long names and many empty rows expands
    # without bound; the budget stops it at the limit.
    try:
        return list(_rows(csv.reader(lines), budget))
    except csv.Error as exc:
        raise Skipped(f"the CSV file cannot be parsed ({exc}); check that it is comma-separated text") from exc


def _rows(reader: Iterator[list[str]], budget: TextBudget) -> Iterator[Section]:
    header: list[str] | None = None
    for row in reader:
        cells = [clean_line(cell) for cell in row]
        if header is None:
            if any(cells):
                header = cells
            continue
        pairs = row_pairs(header, cells)
        if pairs:
            name, value = pairs[0]
            yield Section(budget.take(row_text(pairs)), section=heading_text(f"{name}: {value}"))


def row_pairs(header: Sequence[str], cells: Sequence[str]) -> list[tuple[str, str]]:
    """(column name, value) for each non-empty cell."""
    return [
        (header[i] if i < len(header) and header[i] else f"column {i + 1}", value)
        for i, value in enumerate(cells)
        if value
    ]


def row_text(pairs: Sequence[tuple[str, str]]) -> str:
    return "; ".join(f"{name}: {value}" for name, value in pairs)
