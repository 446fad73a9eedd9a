"""Reading new passages ahead on the page (`HEARTH_RAG__READ_AHEAD`), in a real browser against a real
`hearth ui`: after an upload is indexed, its report stays and a line under it counts the passages read
ahead with the time left, then says they were read, and that stays; the kept caches are on disk afterwards. A
screenshot is kept for a person to look at."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY
from tests.e2e.test_documents_page import create_collection, open_documents

pytestmark = pytest.mark.e2e

CORPUS = Path(__file__).parents[1] / "data" / "corpus"


def test_the_page_reads_an_upload_s_passages_ahead_and_says_so(
    start_app: Callable[..., RunningApp],
    open_page: Callable[[RunningApp], Any],
    monkeypatch: pytest.MonkeyPatch,
    artifacts_dir: Path,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("HEARTH_RAG__READ_AHEAD", "true")  # with the other defaults: four slots
    notes = Path(shutil.copy(CORPUS / "lighthouse-history.md", tmp_path / "lighthouse-history.md"))
    app = start_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=120_000)  # reading ahead needs the model loaded
    open_documents(page)
    create_collection(page, "Coast notes")
    page.set_input_files("#upload input[type=file]", [str(notes)])

    seen: list[str] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not any("passages ahead:" in text for text in seen):
        text = page.inner_text("#ingest-progress")
        if not seen or seen[-1] != text:
            seen.append(text)
        time.sleep(0.05)
    reading = [text for text in seen if "Reading the new passages ahead" in text]
    assert reading, seen
    assert all(text.startswith("Added 1 file (") for text in reading), reading  # under the upload's report
    done = next(text for text in seen if "passages ahead:" in text)
    assert "questions that find them start answering sooner" in done
    page.locator("#cancel").wait_for(state="hidden", timeout=30_000)  # done: the line stays under the report
    assert "passages ahead: questions that find them" in page.inner_text("#ingest-progress")
    page.screenshot(path=str(artifacts_dir / "read-ahead.png"))
    assert any((app.home / "cache" / "passages").rglob("*.kv"))
