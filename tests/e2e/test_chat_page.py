"""The chat page in a real browser against a real `hearth ui` running the embedded model."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from app.ui.theme import EMBER
from tests.e2e.conftest import RunningApp

pytestmark = pytest.mark.e2e

LAST_ANSWER = "#chat .message-row:last-child .message"
STATUS_READY = "#status-line:has-text('llama.cpp (CPU)')"


def answer_text(page: Any) -> str:
    bubbles = page.locator("#chat [data-testid='bot']")
    if bubbles.count() == 0:
        return ""
    text = str(bubbles.last.inner_text())
    # The placeholder shown until the first token ("…", or for a long prompt what the model is reading, and how
    # far it has got).
    reading = text.startswith("Reading ") and " tokens" in text and text.strip().endswith("…")
    return "" if text.strip() == "…" or reading else text


def assistant_rows(app: RunningApp) -> list[int]:
    with sqlite3.connect(app.home / "conversations.db") as db:
        return [row[0] for row in db.execute("SELECT id FROM messages WHERE role = 'assistant'")]


def conversation_titles(app: RunningApp) -> list[str]:
    with sqlite3.connect(app.home / "conversations.db") as db:
        return [row[0] for row in db.execute("SELECT title FROM conversations ORDER BY id")]


def send(page: Any, text: str, accepted: bool = True) -> None:
    """Type and send; when ``accepted``, wait until the question shows in the chat (so the next look at the last
    answer is at the new one, not the previous)."""
    count = "document.querySelectorAll('#chat [data-testid=\"user\"]').length"
    before = page.evaluate(count)
    page.fill("#message textarea", text)
    page.click("#send")
    if accepted:
        page.wait_for_function(f"{count} > {before}", timeout=120_000)  # generous: the machine may be busy


RECORD_ANSWER_CHANGES = """() => {
    window.hearthSnapshots = [];
    const chat = document.querySelector('#chat');
    new MutationObserver(() => {
        const bubbles = chat.querySelectorAll('[data-testid="bot"]');
        if (!bubbles.length) return;
        const text = bubbles[bubbles.length - 1].innerText;
        const seen = window.hearthSnapshots;
        if (text && text.trim() !== '…' && seen[seen.length - 1] !== text) seen.push(text);
    }).observe(chat, {subtree: true, childList: true, characterData: true});
}"""


def watch_answer(page: Any, until: Callable[[str], bool], timeout_s: float = 90) -> list[str]:
    """Snapshots of the answer as it grows, until ``until(text)`` holds. Looked at ten times a second: each look is
    two round trips through the browser, which on a 2-core machine take their time from the model writing the
    answer (whether the answer streams is seen in the page itself, RECORD_ANSWER_CHANGES)."""
    snapshots: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = answer_text(page)
        if text and (not snapshots or snapshots[-1] != text):
            snapshots.append(text)
        if until(text):
            return snapshots
        time.sleep(0.1)
    pytest.fail(f"the answer did not finish; last seen: {snapshots[-1:]!r}")


def grows_from(earlier: str, later: str) -> bool:
    """Whether ``later`` goes on from ``earlier``: its words begin with all of ``earlier``'s but the last, which a
    snapshot may catch while the page renders the markdown again (a word half written, emphasis not yet closed)."""
    words = [re.sub(r"[*_`#>]", "", word) for word in earlier.split()][:-1]
    return [re.sub(r"[*_`#>]", "", word) for word in later.split()][: len(words)] == words


def test_a_question_streams_an_answer_that_survives_a_reload(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], artifacts_dir: Path
) -> None:
    app = shared_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.evaluate(RECORD_ANSWER_CHANGES)  # every state the answer goes through, as the browser renders it
    send(page, "In a short paragraph, what does a lighthouse keeper do?")
    final = watch_answer(page, lambda text: "tokens/s" in text)[-1]
    snapshots = page.evaluate("window.hearthSnapshots")
    assert len(snapshots) >= 3, f"the answer arrived in one piece, not streamed: {snapshots!r}"
    assert all(grows_from(earlier, later) for earlier, later in itertools.pairwise(snapshots[:-1])), snapshots
    assert len(final.split("to first token")[0].strip()) > 20
    assert page.input_value("#message textarea") == ""
    page.screenshot(path=str(artifacts_dir / "chat.png"))
    # Hearth's own look (app/ui/theme.py): Send in the ember accent, Stop waiting in outline, not filled red.
    # The pointer leaves Send first: it rests where send() clicked, and a hovered button is a shade darker.
    page.mouse.move(0, 0)
    ember = "rgb" + str(tuple(int(EMBER.c600[i : i + 2], 16) for i in (1, 3, 5)))
    colour = "(selector) => getComputedStyle(document.querySelector(selector)).backgroundColor"
    page.wait_for_function(f"() => ({colour})('#send') === '{ember}'", timeout=5_000)
    stop = [int(part) for part in re.findall(r"\d+", page.evaluate(colour, "#stop"))[:3]]
    assert min(stop) >= 240, stop  # near white: an outline, not a filled red button
    if target := os.environ.get("DOCS_SCREENSHOT"):
        shutil.copy(artifacts_dir / "chat.png", target)

    page.reload()
    page.wait_for_selector("#message textarea")
    title = page.locator("#conversation-list label", has_text="lighthouse keeper")
    title.wait_for(timeout=15_000)
    title.click()
    page.wait_for_function("document.querySelectorAll('#chat [data-testid=\"bot\"]').length === 1", timeout=15_000)
    assert answer_text(page).split("\n")[0] == final.split("\n")[0]
    assert app.remote_requests == [], f"the page reached beyond this machine: {app.remote_requests}"


def test_stop_keeps_the_partial_answer(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = shared_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    # The model may finish a short answer before the click lands; a few long requests make that vanishingly rare.
    for attempt in range(3):
        send(page, f"Write a very long essay about the history of the printing press, part {attempt + 1}.")
        watch_answer(page, lambda text: bool(text.strip()))
        page.click("#stop", force=True)  # disabled (and so doing nothing) if the answer already ended
        final = watch_answer(page, lambda text: "tokens/s" in text, timeout_s=60)[-1]
        if "stopped" in final:
            break
    else:
        pytest.fail("every answer finished before Stop took effect")
    with sqlite3.connect(app.home / "conversations.db") as db:
        content, stats = db.execute(
            "SELECT content, stats FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1"
        ).fetchone()
    assert content.strip()
    assert '"finish_reason": "cancelled"' in stats


def test_regenerate_and_new_chat(shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]) -> None:
    app = shared_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    earlier = set(assistant_rows(app))  # the data folder is shared with the module's other tests
    conversations = conversation_titles(app)
    send(page, "Say hello.")
    watch_answer(page, lambda text: "tokens/s" in text)
    first_answer = [row for row in assistant_rows(app) if row not in earlier]
    assert len(first_answer) == 1

    def answers_now() -> list[int]:
        return [row for row in assistant_rows(app) if row not in earlier]

    page.click("#regenerate")
    deadline = time.monotonic() + 60
    while answers_now() in ([], first_answer) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(answers_now()) == 1 and answers_now() != first_answer
    # The regenerated answer is saved before its last words reach the page: let it end there first (Stop goes
    # back to disabled when the page has the whole answer).
    expect(page.locator("#stop")).to_be_disabled(timeout=60_000)
    with sqlite3.connect(app.home / "conversations.db") as db:
        roles = [
            row[0]
            for row in db.execute(
                "SELECT m.role FROM messages m JOIN conversations c ON m.conversation_id = c.id "
                "WHERE c.title = 'Say hello.' ORDER BY m.id"
            )
        ]
    assert roles == ["user", "assistant"]
    # One way to start over: New chat (no second "Clear" button, no trash icon on the chat box).
    assert page.locator("#clear").count() == 0
    expect(page.locator("#chat button[aria-label='Clear']")).to_be_hidden()
    page.click("#new-chat")
    page.wait_for_function("document.querySelectorAll('#chat [data-testid=\"bot\"]').length === 0")
    expect(page.locator("#delete")).to_be_disabled()  # nothing selected: nothing to delete
    send(page, "Another topic.")
    watch_answer(page, lambda text: "tokens/s" in text)
    assert len(conversation_titles(app)) == len(conversations) + 2
    page.click("#new-chat")

    # Deleting asks for a second click; "Keep it" keeps it.
    expect(page.locator("#delete")).to_be_disabled()
    page.locator("#conversation-list label", has_text="Say hello.").click()
    page.wait_for_function("document.querySelectorAll('#chat [data-testid=\"bot\"]').length === 1")
    expect(page.locator("#delete")).to_be_enabled()
    page.click("#delete")
    page.click("#cancel-delete")
    page.click("#delete")
    page.click("#confirm-delete")
    page.locator("#conversation-list label", has_text="Say hello.").wait_for(state="detached", timeout=10_000)
    expect(page.locator("#delete")).to_be_disabled()
    assert sorted(set(conversation_titles(app)) - set(conversations)) == ["Another topic."]
    assert len(conversation_titles(app)) == len(conversations) + 1


def test_empty_message_gets_a_hint(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = shared_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.click("#send")
    page.get_by_text("Type a question first.").wait_for(timeout=10_000)


def test_a_broken_model_is_explained_and_the_app_keeps_running(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    app = start_app("--model", str(broken))
    page = open_page(app)
    page.wait_for_selector("#status-line:has-text('Model not loaded')", timeout=30_000)
    send(page, "Hello?", accepted=False)
    page.get_by_text("Download the model again").first.wait_for(timeout=15_000)
    assert page.input_value("#message textarea") == "Hello?"  # the typed message is not lost
    assert app.process.poll() is None


def test_a_message_longer_than_the_context_is_refused_and_kept_in_the_box(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = shared_app("--context", "256")  # the smallest window: a story or two fills it
    page = open_page(app)
    page.wait_for_selector("#status-line:has-text('context 256 tokens')", timeout=60_000)
    conversations = conversation_titles(app)
    too_long = "lighthouse " * 1200
    send(page, too_long, accepted=False)
    refusal = page.get_by_text("Shorten the message").first
    refusal.wait_for(timeout=15_000)
    assert "Answer settings" in refusal.inner_text() and "--context" not in refusal.inner_text()
    assert page.input_value("#message textarea") == too_long
    assert conversation_titles(app) == conversations  # the refused question created nothing
    assert app.process.poll() is None


def test_trimming_old_turns_is_shown(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = shared_app("--context", "256")  # the smallest window: a story or two fills it
    page = open_page(app)
    page.wait_for_selector("#status-line:has-text('context 256 tokens')", timeout=60_000)
    with sqlite3.connect(app.home / "conversations.db") as db:
        (kept,) = db.execute("SELECT COUNT(*) FROM messages").fetchone()
    for topic in ("the sea", "the mountains", "a city at night"):
        send(page, f"Write a long, detailed story about {topic}.")
        # Each answer fills what is left of the context: minutes when another test runs beside this one.
        watch_answer(page, lambda text: "tokens/s" in text, timeout_s=300)
        if "left out to fit the context" in answer_text(page):
            break
    assert "earlier messages left out to fit the context" in answer_text(page)
    assert "left out so the conversation fits" in page.inner_text("#notice")
    with sqlite3.connect(app.home / "conversations.db") as db:
        assert db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] >= kept + 4  # nothing deleted from disk
