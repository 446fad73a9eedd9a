"""The page with a damaged store, in a real browser against a real `hearth ui`: it comes up, says which store is
damaged and what to do, keeps working where it can, and its log holds no traceback."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.services.conversations import ConversationStore
from rag.manifest import FileRecord, Manifest
from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, answer_text, send

pytestmark = pytest.mark.e2e


def overwrite_page(path: Path, page: int) -> None:
    with path.open("r+b") as file:
        file.seek((page - 1) * 4096)
        file.write(random.Random(page).randbytes(4096))


def toast_text(page: Any, containing: str) -> str:
    """The text of the notice that contains ``containing`` (waiting for it), then closes it."""
    toast = page.locator("[data-testid='toast-body']").filter(has_text=containing).first
    toast.wait_for(timeout=60_000)
    text = str(toast.inner_text())
    toast.locator("[data-testid='toast-close']").click()
    toast.wait_for(state="detached", timeout=10_000)
    return text


def wait_for_answer(page: Any) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if text := answer_text(page).strip():
            return text
        time.sleep(0.2)
    pytest.fail("no answer came")


def test_a_damaged_documents_index_leaves_plain_chat_working(
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
    shown = toast_text(page, "documents index")
    assert f"{isolated_home / 'index.db'} is damaged" in shown
    assert "hearth repair" in shown and "chat works without documents" in shown

    page.wait_for_selector(STATUS_READY, timeout=120_000)
    send(page, "Say hello.")
    assert wait_for_answer(page)  # plain chat answers
    assert "Traceback" not in app.log.read_text()


def test_a_damaged_conversation_database_is_named_on_the_page(
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
    shown = toast_text(page, "conversation database")
    assert f"{isolated_home / 'conversations.db'} is damaged" in shown and "hearth repair" in shown

    page.wait_for_selector(STATUS_READY, timeout=120_000)
    send(page, "Say hello.", accepted=False)
    assert "can be neither opened nor saved" in toast_text(page, "conversation database")  # said, not hidden
    assert "Traceback" not in app.log.read_text()
