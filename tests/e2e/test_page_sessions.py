"""Stop belongs to the browser session that pressed it: with the embedded model writing two answers for two browser
sessions (two Playwright contexts, as two people would be), Stop in one ends that answer only, Stop in a third
session with no answer ends nothing, and the other answer goes on to finish by itself."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, answer_text, send, watch_answer

pytestmark = pytest.mark.e2e

FINISHED = "tokens/s"


def answer_settings(page: Any, max_new_tokens: int, temperature: float | None = None) -> None:
    page.click("#answer-settings")
    boxes = [("#answer-settings input[type='number']", max_new_tokens)]  # the last one is "Max new tokens"
    if temperature is not None:
        boxes.append(("#temperature input[type='number']", temperature))
    for selector, value in boxes:
        box = page.locator(selector).last
        box.fill(str(value))
        box.press("Enter")


def wait_until_it_grows(page: Any, seen: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = answer_text(page)
        if text != seen and FINISHED not in text:
            return text
        assert FINISHED not in text, "the answer ended"
        time.sleep(0.05)
    pytest.fail("the answer stopped growing")


@pytest.mark.timeout(600)  # two answers from the real model on a shared machine; a bound against hanging only
def test_stop_in_one_browser_session_ends_only_its_own_answer(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = start_app()
    keeps_going, stopped, bystander = open_page(app), open_page(app), open_page(app)
    for page in (keeps_going, stopped, bystander):
        page.wait_for_selector(STATUS_READY, timeout=90_000)
    # Greedy, so the story is the same long one every run: long enough to outlive the other answer, and cut at its
    # token limit to finish by itself.
    answer_settings(keeps_going, max_new_tokens=192, temperature=0)
    answer_settings(stopped, max_new_tokens=1024)
    send(keeps_going, "Write a very long story about a lighthouse keeper and a storm, with many details.")
    watch_answer(keeps_going, lambda text: bool(text.strip()))
    send(stopped, "Write a very long essay about the history of bread, in many paragraphs.")
    watch_answer(stopped, lambda text: bool(text.strip()))

    expect(bystander.locator("#stop")).to_be_disabled()  # a session with no answer of its own: nothing to stop
    growing = wait_until_it_grows(keeps_going, answer_text(keeps_going))
    wait_until_it_grows(stopped, answer_text(stopped))

    stopped.click("#stop")
    ended = watch_answer(stopped, lambda text: FINISHED in text, timeout_s=60)[-1]
    assert "stopped" in ended
    at_the_stop = answer_text(keeps_going)
    assert FINISHED not in at_the_stop, "the other answer ended with this one"
    wait_until_it_grows(keeps_going, at_the_stop)  # still being written after the Stop

    final = watch_answer(keeps_going, lambda text: FINISHED in text, timeout_s=180)[-1]
    stats = final.strip().splitlines()[-1]
    assert FINISHED in stats and "stopped" not in stats, stats  # it ended by itself: its token limit or its end
    assert len(final) > len(at_the_stop) > len(growing)
    assert app.remote_requests == []
