"""A file dropped on the message box, in a real browser against a real `hearth ui`: the page says
how the file reached the model, the sources cite it, a reload keeps it, deleting the conversation deletes it, and a
file that cannot be read keeps the message in the box."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, answer_text
from tests.helpers import write_pdf

pytestmark = pytest.mark.e2e

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
ANSWER_TIMEOUT_MS = 180_000


def attach_and_send(page: Any, files: list[Path], text: str) -> None:
    page.set_input_files("#message input[type=file]", [str(f) for f in files])
    pending = page.locator("#pending-files")
    for file in files:  # the line under the chat names each file once the box holds it
        pending.filter(has_text=file.name).wait_for(timeout=30_000)
    thumbnails = page.locator("#message [aria-label='File thumbnail']")
    thumbnails.nth(len(files) - 1).wait_for(timeout=30_000)
    page.fill("#message textarea", text)
    page.click("#send")


def attachments(app: RunningApp) -> list[str]:
    with sqlite3.connect(app.home / "conversations.db") as db:
        return [row[0] for row in db.execute("SELECT name FROM attachments ORDER BY id")]


def greedy(page: Any) -> None:
    page.click("#answer-settings")
    page.locator("#temperature input[type=number]").fill("0")
    page.locator("#temperature input[type=number]").press("Enter")
    page.click("#answer-settings button")


def test_a_dropped_file_answers_is_cited_and_leaves_with_its_conversation(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], artifacts_dir: Path, tmp_path: Path
) -> None:
    app = shared_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    greedy(page)
    note = tmp_path / "boat-log.txt"
    note.write_text("The boat Marigold is moored at pier 7. Its engine was serviced by Ewan Ross in March 2026.\n")
    attach_and_send(page, [note], "Who serviced the engine?")
    bot = page.locator("#chat [data-testid='bot']").last
    bot.filter(has_text="tokens/s").wait_for(timeout=ANSWER_TIMEOUT_MS)
    text = answer_text(page)
    assert "boat-log.txt: whole file in context" in text, text
    assert "[1] boat-log.txt · whole file" in text, text
    files = page.locator("#chat-files")
    # The line names the file from the moment it is attached; how the answer used it comes in a later update.
    files.filter(has_text="boat-log.txt").filter(has_text="whole file in context").wait_for(timeout=15_000)
    assert page.input_value("#message textarea") == ""
    assert page.locator("#message [aria-label='File thumbnail']").count() == 0  # the box let the file go
    assert page.locator("#pending-files").inner_text().strip() == ""
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(artifacts_dir / "attached-file.png"))

    # A long PDF in the same conversation is searched; the page says how many of its passages were used.
    routine = (
        "the harbour office keeps tide tables, mooring fees, the ferry timetable, the fuel prices, the list of "
        "berths for visiting yachts and the weather forecast for the coming days, posted each morning at eight."
    )
    pages = [f"Season {n}: {routine} {routine}" for n in range(1, 70)]  # about 6,000 tokens: more than fits
    pages[40] = "The harbour master is Isla Munro, reached on radio channel 14."
    pdf = write_pdf(tmp_path / "harbour-guide.pdf", pages)
    attach_and_send(page, [pdf], "Who is the harbour master?")
    page.locator("#chat [data-testid='bot']").nth(1).filter(has_text="tokens/s").wait_for(timeout=ANSWER_TIMEOUT_MS)
    text = answer_text(page)
    assert "harbour-guide.pdf: searched," in text and "passage" in text, text
    assert "harbour-guide.pdf · page 41" in text, text
    files.filter(has_text="harbour-guide.pdf").filter(has_text="searched").wait_for(timeout=15_000)
    assert "69 pages" in files.inner_text()
    assert attachments(app) == ["boat-log.txt", "harbour-guide.pdf"]
    assert not list((app.home / "documents").rglob("*.pdf"))  # kept with the conversation, not as a collection file

    # A reload shows the files again, with how the last answer used them.
    page.reload()
    page.wait_for_selector("#message textarea")
    page.locator("#chat-files").filter(has_text="harbour-guide.pdf").wait_for(timeout=15_000)
    assert "boat-log.txt" in page.locator("#chat-files").inner_text()

    # Deleting the conversation deletes its files.
    page.click("#delete")
    page.click("#confirm-delete")
    page.wait_for_function("document.querySelectorAll('#chat [data-testid=\"bot\"]').length === 0", timeout=15_000)
    assert attachments(app) == []
    page.wait_for_function("document.querySelector('#chat-files').innerText.trim() === ''", timeout=15_000)
    assert app.remote_requests == [], f"the page reached beyond this machine: {app.remote_requests}"


def test_a_file_that_cannot_be_read_is_refused_and_the_message_stays(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], tmp_path: Path
) -> None:
    app = shared_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    with sqlite3.connect(app.home / "conversations.db") as db:
        (conversations,) = db.execute("SELECT COUNT(*) FROM conversations").fetchone()  # the module shares the app
    blob = tmp_path / "blob.txt"
    blob.write_bytes(bytes(range(256)) * 64)
    attach_and_send(page, [blob], "What is in it?")
    page.get_by_text("blob.txt was not attached").first.wait_for(timeout=60_000)
    assert page.input_value("#message textarea") == "What is in it?"
    assert page.locator("#message [aria-label='File thumbnail']").count() == 1  # the file is still in the box
    assert "blob.txt" in page.locator("#pending-files").inner_text()
    with sqlite3.connect(app.home / "conversations.db") as db:
        assert db.execute("SELECT COUNT(*) FROM conversations").fetchone() == (conversations,)


def test_a_text_file_without_an_extension_is_attached_and_a_picture_is_refused_with_the_reason(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], tmp_path: Path
) -> None:
    """Every file dropped reaches Hearth (the browser's own type filter once dropped these without a word): a text
    file named without an extension is read as text, a picture is refused with what Hearth reads."""
    app = shared_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    licence = tmp_path / "LICENSE"
    licence.write_text("Permission is granted to copy this harbour guide, provided this notice is kept.\n")
    attach_and_send(page, [licence], "May I copy the guide?")
    page.locator("#chat [data-testid='bot']").last.filter(has_text="tokens/s").wait_for(timeout=ANSWER_TIMEOUT_MS)
    assert "LICENSE: whole file in context" in answer_text(page)

    page.click("#new-chat")
    picture = tmp_path / "photo.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    attach_and_send(page, [picture], "What is in the picture?")
    page.get_by_text("photo.png was not attached: .png is not supported").first.wait_for(timeout=60_000)
    assert page.input_value("#message textarea") == "What is in the picture?"
