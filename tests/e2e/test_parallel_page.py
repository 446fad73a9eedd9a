"""Two browser tabs answered at the same time, each Stop button stopping only its own answer, and the page
surviving a SIGKILL of the engine process in the middle of an answer."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, answer_text, send, watch_answer

pytestmark = pytest.mark.e2e

LONG_ANSWER = "Write a very long story about a lighthouse keeper and a storm, with many details."


def engine_pid(app: RunningApp) -> int:
    for child in psutil.Process(app.process.pid).children(recursive=True):
        if "backends.engine" in " ".join(child.cmdline()):
            return int(child.pid)
    raise AssertionError("no engine process under hearth ui")


def last_message(app: RunningApp) -> int:
    with sqlite3.connect(app.home / "conversations.db") as db:
        return int(db.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0])


def long_answers(page: Any) -> None:
    page.click("#answer-settings")
    slider = page.locator("#answer-settings input[type='number']").last  # "Max new tokens"
    slider.fill("1024")
    slider.press("Enter")


def test_two_tabs_are_answered_at_the_same_time_and_stop_only_their_own(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = shared_app()
    last = last_message(app)  # the module's tests share the app
    first, second = open_page(app), open_page(app)
    for page in (first, second):
        page.wait_for_selector(STATUS_READY, timeout=60_000)
        long_answers(page)
    send(first, LONG_ANSWER)
    watch_answer(first, lambda text: bool(text.strip()))
    send(second, "Write a very long essay about the history of bread, in many paragraphs.")
    watch_answer(second, lambda text: bool(text.strip()))
    # Both are being written now: the first one keeps growing while the second one streams.
    growing = answer_text(first)
    deadline = time.monotonic() + 30
    while answer_text(first) == growing and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answer_text(first) != growing and "tokens/s" not in answer_text(first)
    assert "tokens/s" not in answer_text(second)

    second.click("#stop")  # stops the second tab's answer only
    final_second = watch_answer(second, lambda text: "tokens/s" in text, timeout_s=60)[-1]
    assert "stopped" in final_second
    assert "tokens/s" not in answer_text(first)
    first.click("#stop")
    watch_answer(first, lambda text: "tokens/s" in text, timeout_s=60)
    with sqlite3.connect(app.home / "conversations.db") as db:
        rows = db.execute(
            "SELECT c.title, m.content FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            "WHERE m.role = 'assistant' AND m.id > ?",
            (last,),
        ).fetchall()
    assert len(rows) == 2 and len({title for title, _ in rows}) == 2  # each answer in its own conversation


def test_a_killed_engine_ends_the_answer_with_a_message_and_the_next_question_works(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = shared_app()
    last = last_message(app)  # the module's tests share the app
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    long_answers(page)
    send(page, LONG_ANSWER)
    watch_answer(page, lambda text: len(text.split()) > 10)
    victim = engine_pid(app)
    os.kill(victim, signal.SIGKILL)
    final = watch_answer(page, lambda text: "stopped unexpectedly" in text, timeout_s=30)[-1]
    assert "SIGKILL" in final and "restarting" in final
    # The engine restarts by itself; until it is ready a question is refused with "send again in a moment".
    user_count = "document.querySelectorAll('#chat [data-testid=\"user\"]').length"
    before = page.evaluate(user_count)
    page.fill("#message textarea", "Say hello.")
    deadline = time.monotonic() + 90
    while page.evaluate(user_count) == before:
        assert time.monotonic() < deadline, "the restarted engine never took a question"
        page.click("#send")
        time.sleep(2)
    watch_answer(page, lambda text: "tokens/s" in text, timeout_s=90)
    assert engine_pid(app) != victim
    with sqlite3.connect(app.home / "conversations.db") as db:
        content, stats = db.execute(
            "SELECT content, stats FROM messages WHERE role = 'assistant' AND id > ? ORDER BY id LIMIT 1", (last,)
        ).fetchone()
    assert content.strip() and '"finish_reason": "error"' in stats  # what was written before the kill is saved
    assert app.process.poll() is None
    assert app.remote_requests == []
