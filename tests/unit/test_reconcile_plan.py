"""What reconciling a collection removes and what it sends back to be indexed (pure)."""

from __future__ import annotations

import pytest

from models.shared.database import first_complaint
from rag.reconcile import plan_reconciliation
from rag.store import is_rust_panic


def test_chunks_no_indexed_file_owns_are_orphans() -> None:
    plan = plan_reconciliation(
        indexed={"/d/a.txt": 2, "/d/b.txt": 1},
        stored={"/d/a.txt": ["a0", "a1"], "/d/b.txt": ["b0"], "/d/crashed.txt": ["c0", "c1"], "/d/skipped.pdf": ["s0"]},
    )
    assert plan.orphans == {"/d/crashed.txt": ["c0", "c1"], "/d/skipped.pdf": ["s0"]}
    assert plan.orphan_ids == ["c0", "c1", "s0"]
    assert plan.missing == []


def test_chunks_written_lately_are_left_to_the_hearth_still_writing_them() -> None:
    """On a shared server: another Hearth's file whose passages are written and whose record is still to come."""
    stored = {"/d/a.txt": ["a0"], "/theirs/new.txt": ["n0", "n1"], "/d/crashed.txt": ["c0"]}
    plan = plan_reconciliation(indexed={"/d/a.txt": 1}, stored=stored, recent={"/theirs/new.txt"})
    assert plan.orphans == {"/d/crashed.txt": ["c0"]} and plan.missing == []


def test_files_whose_chunks_are_gone_are_indexed_again() -> None:
    plan = plan_reconciliation(indexed={"/d/a.txt": 3, "/d/b.txt": 1, "/d/empty.txt": 0}, stored={"/d/a.txt": ["a0"]})
    assert plan.orphans == {}
    assert plan.missing == ["/d/a.txt", "/d/b.txt"]


def test_a_consistent_collection_needs_nothing() -> None:
    plan = plan_reconciliation(indexed={"/d/a.txt": 1}, stored={"/d/a.txt": ["a0"]})
    assert plan.orphans == {} and plan.missing == []


@pytest.mark.parametrize(
    ("rows", "complaint"),
    [
        ([("ok",)], None),
        (
            [("*** in database main ***\nPage 12: btreeInitPage() returns error code 11",)],
            "Page 12: btreeInitPage() returns error code 11",
        ),
        ([("row 3 missing from index x",), ("row 4 missing from index x",)], "row 3 missing from index x"),
    ],
)
def test_the_first_real_complaint_of_a_check(rows: list[tuple[str]], complaint: str | None) -> None:
    assert first_complaint(rows) == complaint


def test_a_rust_panic_is_recognised_by_its_type_not_its_text() -> None:
    panic = type("PanicException", (BaseException,), {"__module__": "pyo3_runtime"})
    other = type("PanicException", (BaseException,), {"__module__": "somewhere_else"})
    assert is_rust_panic(panic("range start index 10 out of range"))
    assert not is_rust_panic(other("x"))
    assert not is_rust_panic(RuntimeError("PanicException"))
