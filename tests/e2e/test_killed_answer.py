"""Killing Hearth while it writes an answer loses at most the last couple of seconds of it: a real `hearth ui` with
the embedded model, a real browser watching the answer stream, a real SIGKILL, a restart on the same data."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from app.services.answering.drafts import DRAFT_EVERY_S, INTERRUPTED
from app.services.library.conversations import ConversationStore
from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, answer_text, send

pytestmark = pytest.mark.e2e

QUESTION = "Write a very long story about a lighthouse keeper and a storm, in many paragraphs."


def words(text: str) -> list[str]:
    return re.sub(r"[^\w']+", " ", text).split()


class Throttle:
    """Holds the app's child processes (its engine) stopped most of the time, so an answer is written several times
    slower in wall time whatever the machine: how long the model's answer runs is up to the model and the CPU (on a
    faster machine the same seed once ended at 396 tokens in about 5 s), and the test needs it still running when it
    kills. The app itself (the page, the draft timer) is never held."""

    RUN_S = 0.02
    HELD_S = 0.06

    def __init__(self, pid: int) -> None:
        self._parent = psutil.Process(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._cycle, daemon=True)
        self._held: dict[int, psutil.Process] = {}

    def __enter__(self) -> Throttle:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        # Every child ever seen is signalled: once the app is killed its children move to another parent and can no
        # longer be listed through it, and one left stopped would never exit.
        with contextlib.suppress(psutil.NoSuchProcess):
            self._held.update((child.pid, child) for child in self._parent.children(recursive=True))
        for child in self._held.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                child.send_signal(signum)

    def _cycle(self) -> None:
        while not self._stop.is_set():
            self._signal(signal.SIGSTOP)
            time.sleep(self.HELD_S)
            self._signal(signal.SIGCONT)
            time.sleep(self.RUN_S)


def test_a_kill_mid_answer_keeps_what_was_written_up_to_two_seconds_before(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Room for an answer far longer than the test watches (512 tokens take under 6 s on a quiet fast machine).
    monkeypatch.setenv("HEARTH_GENERATION__MAX_NEW_TOKENS", "2048")
    # The answer must still be being written several seconds after it starts: a fixed seed (with it `hearth chat`
    # wrote 512 words here) and one thread (half the speed), so that a shorter draw elsewhere still outlasts the
    # watch (with two threads and no seed, an answer once ended before the kill in the full suite).
    monkeypatch.setenv("HEARTH_GENERATION__SEED", "1")
    monkeypatch.setenv("HEARTH_BACKEND__THREADS", "1")
    app = start_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    with Throttle(app.process.pid):
        send(page, QUESTION)
        deadline = time.monotonic() + 240
        while len(words(answer_text(page))) < 15:  # the page has shown 15 pieces of the answer
            assert time.monotonic() < deadline, "the answer never got going"
            time.sleep(0.05)
        time.sleep(DRAFT_EVERY_S + 1.0)  # at least one draft interval after the first pieces
        shown_before = words(answer_text(page))
        time.sleep(DRAFT_EVERY_S + 0.5)
        assert "tokens/s" not in answer_text(page), "the answer ended before the kill; ask for a longer one"
        os.kill(app.process.pid, signal.SIGKILL)
    app.process.wait(timeout=30)

    store = ConversationStore(app.home / "conversations.db")
    try:
        [summary] = store.list()
        messages = store.get(summary.id).messages
    finally:
        store.close()
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[0].content == QUESTION
    saved = words(messages[1].content)
    # Everything the page showed a draft interval before the kill was saved (the last word may have been partial).
    assert len(saved) >= len(shown_before) - 1, (len(saved), len(shown_before))
    assert saved[: len(shown_before) - 1] == shown_before[: len(shown_before) - 1]
    assert messages[1].stats is not None and messages[1].stats.finish_reason == INTERRUPTED

    # After a restart the page shows it, and says it was cut off.
    again = start_app(home=app.home, port=app.port)
    page.goto(again.entry_url)
    page.locator("#conversation-list label").first.click()
    page.get_by_text("cut off: Hearth stopped while writing this answer").wait_for(timeout=60_000)
    assert words(answer_text(page))[: len(shown_before) - 1] == shown_before[: len(shown_before) - 1]
