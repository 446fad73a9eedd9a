"""Hostile documents through the Documents tab of a real `hearth ui`: the refusal is the file's status, and
Cancel stops a file in the middle of being read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.document_bombs import write_expanding_docx, write_slow_pdf
from tests.e2e.conftest import RunningApp
from tests.e2e.test_documents_page import (
    create_collection,
    open_documents,
    press_cancel,
    table_rows,
    upload,
    wait_for_report,
)

pytestmark = pytest.mark.e2e


def test_a_bomb_is_refused_with_its_reason_and_cancel_reaches_inside_a_file(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], tmp_path: Path
) -> None:
    bomb = write_expanding_docx(tmp_path / "expanding.docx", 2 << 30)  # 6 MB that expand to 2 GB
    note = tmp_path / "note.md"
    note.write_text("# Lamps\n\nThe keeper trims the wick at dusk.")
    slow = write_slow_pdf(tmp_path / "slow.pdf", pages=40)  # about a second a page: time to press Cancel
    app = start_app()
    page = open_page(app)
    open_documents(page)
    create_collection(page, "Bombs", app)

    report = upload(page, [bomb, note], expect="Added 1 file")
    assert "Skipped expanding.docx: its part word/document.xml expands" in report, report
    rows = table_rows(page)
    assert rows["note.md"][0] == "indexed"
    assert rows["expanding.docx"][0].startswith("skipped: its part word/document.xml expands"), rows
    assert "zip bomb" in rows["expanding.docx"][0]

    page.set_input_files("#upload input[type=file]", [str(slow)])
    page.locator("#ingest-progress", has_text="slow.pdf").wait_for(timeout=60_000)
    press_cancel(page)
    report = wait_for_report(page, "Cancelled after", app)
    assert "Cancelled after 0 of 1 file (slow.pdf stopped part-way, not added)" in report, report
    assert sorted(table_rows(page)) == ["expanding.docx", "note.md"]  # nothing recorded for the cancelled file
    assert not list((app.home / "documents").rglob("slow.pdf"))  # and its copy is not kept
