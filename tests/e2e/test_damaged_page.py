"""A damaged store, in a real browser against a real `hearth ui`: Hearth repairs a damaged database as it starts
(the page tells the person to restart when it meets damage while running), the page comes up with what was kept,
and the log holds no traceback."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.services.library.conversations import ConversationStore
from rag.manifest import FileRecord, Manifest
from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, answer_text, send

pytestmark = pytest.mark.e2e


def overwrite_page(path: Path, page: int) -> None:
    with path.open("r+b") as file:
        file.seek((page - 1) * 4096)
        file.write(random.Random(page).randbytes(4096))


def wait_for_answer(page: Any) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if text := answer_text(page).strip():
            return text
        time.sleep(0.2)
    pytest.fail("no answer came")


def test_a_damaged_documents_index_is_repaired_as_hearth_starts_and_chat_works(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], isolated_home: Path
) -> None:
    isolated_home.mkdir(parents=True)
    manifest = Manifest(isolated_home / "index.db")
    info = manifest.create("ship logs", "all-MiniLM-L6-v2")
    for number in range(200):
        manifest.record(info.name, FileRecord(f"/logs/{number}.txt", "0" * 64, 10, 10, "indexed", 1, ""))
    manifest.close()
    overwrite_page(isolated_home / "index.db", 3)

    app = start_app()
    page = open_page(app)
    log = app.log.read_text()
    assert "The documents index was damaged; repaired it" in log, log
    assert list(isolated_home.glob("index.db.damaged-*"))  # set aside, not deleted
    page.wait_for_selector(STATUS_READY, timeout=120_000)
    send(page, "Say hello.")
    assert wait_for_answer(page)  # plain chat answers
    assert page.locator("[data-testid='toast-body']").filter(has_text="damaged").count() == 0
    assert "Traceback" not in app.log.read_text()


def test_a_damaged_conversation_database_is_repaired_as_hearth_starts(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], isolated_home: Path
) -> None:
    isolated_home.mkdir(parents=True)
    store = ConversationStore(isolated_home / "conversations.db")
    for number in range(100):
        conversation = store.create("s")
        store.append(conversation.id, "user", f"question {number} " + "about the tides " * 20)
    store.close()
    overwrite_page(isolated_home / "conversations.db", 10)

    app = start_app()
    page = open_page(app)
    assert "The conversation database was damaged; repaired it" in app.log.read_text()
    page.locator("#conversation-list label").first.wait_for(timeout=30_000)
    kept = page.locator("#conversation-list label").count()
    assert kept >= 80, kept  # what sat on the damaged page may be lost; the rest is listed
    page.wait_for_selector(STATUS_READY, timeout=120_000)
    send(page, "Say hello.")
    assert wait_for_answer(page)  # and new conversations are saved again
    assert page.locator("[data-testid='toast-body']").filter(has_text="damaged").count() == 0
    assert "Traceback" not in app.log.read_text()
