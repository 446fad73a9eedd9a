"""Indexing a long PDF on the Documents tab, in a real browser against a real `hearth ui`: the progress line moves
inside the file, the rows of files already done appear before it ends, and Cancel in the middle of it says so at
once, stops, and leaves the store and the manifest in agreement."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.test_documents_page import create_collection, open_documents, press_cancel, table_rows
from tests.integration.test_ingest_progress import long_pdf

pytestmark = pytest.mark.e2e

# Generous bounds for "it happens instead of hanging" on a busy machine, not performance claims.
SEEN_TIMEOUT_MS = 180_000
STOP_TIMEOUT_MS = 60_000


def progress_texts_until(page: Any, done: Callable[[list[str]], bool], timeout_s: float) -> list[str]:
    """Every distinct text of the progress line, polled until ``done`` holds for those seen."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = page.inner_text("#ingest-progress")
        if not seen or seen[-1] != text:
            seen.append(text)
        if done(seen):
            return seen
        time.sleep(0.1)
    pytest.fail(f"the progress line never got there; it showed: {seen}")


def embedding_manual(seen: list[str]) -> list[str]:
    head = "Indexing 2 of 2: b-manual.pdf · embedding"
    return [text for text in seen if text.startswith(head) and "passages/s" in text and "to go" in text]


def test_progress_moves_inside_a_long_pdf_rows_come_early_and_cancel_stops_it(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], tmp_path: Path
) -> None:
    notes = tmp_path / "a-notes.md"
    notes.write_text("# Watch\n\nThe keeper logs the weather at dawn and dusk.\n")
    manual = long_pdf(tmp_path / "b-manual.pdf", pages=100)
    app = start_app()
    page = open_page(app)
    open_documents(page)
    create_collection(page, "Manuals")
    page.set_input_files("#upload input[type=file]", [str(notes), str(manual)])

    # The line moves while the one file is embedded: its count, rate and time left change.
    seen = progress_texts_until(page, lambda texts: len(embedding_manual(texts)) >= 2, 300)
    assert not [text for text in seen if "Indexing 3" in text or "chunks/s" in text], seen
    # The first file's row is in the table while the second is still being indexed.
    assert table_rows(page)["a-notes.md"][0] == "indexed"
    assert "b-manual.pdf" not in table_rows(page)

    press_cancel(page)
    page.locator("#ingest-progress", has_text="Cancelled after 1 of 2 files").wait_for(timeout=STOP_TIMEOUT_MS)
    report = page.inner_text("#ingest-progress")
    assert "b-manual.pdf stopped part-way, not added" in report, report
    page.locator("#collection-summary", has_text="1 file").wait_for(timeout=10_000)
    assert list(table_rows(page)) == ["a-notes.md"]
    assert not page.locator("#cancel").is_visible()

    app.stop()
    from app.paths import resolve_data_paths
    from app.services.library.documents import build_documents
    from app.settings import load_settings

    settings = load_settings()
    documents = build_documents(settings, resolve_data_paths(app.home))
    try:
        info = documents.manifest.get("Manuals")
        assert list(documents.manifest.files(info.name)) == [str(app.home / "documents" / info.store_name / notes.name)]
        stored = documents.store.count(info.store_name, info.embedder)
        assert stored == documents.manifest.indexed_chunks(info.name) > 0
    finally:
        documents.close()
