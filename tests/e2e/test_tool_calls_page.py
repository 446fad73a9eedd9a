"""Tool calls in the Chat tab, in a real browser against a real `hearth ui` with the embedded model: with tools on
("call one first", since the embedded model never calls on its own), the call is shown with its tool, server and
arguments and waits for the user; Allow once runs it and the result is shown, collapsed, above the answer; Deny
runs nothing and the model is told; "Always allow this tool" is remembered and not asked again; Stop while a
call waits ends the answer; and every call is kept with its answer across a reload."""

from __future__ import annotations

import json
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

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, answer_text, send

pytestmark = pytest.mark.e2e

QUESTION = "What is 12 times 7?"


def tools_on(page: Any, choice: str = "Tools: call one first") -> None:
    page.click("#chat-tools input")
    page.get_by_role("option", name=choice).click()
    expect(page.locator("#chat-tools input")).to_have_value(choice)


def answered(page: Any, button: str = "") -> str:
    """The last answer, once it is complete (its stats line is shown); each further call the model makes on the
    way (the embedded model often calls again) is answered with ``button``."""
    answer = page.locator("#chat [data-testid='bot']").last
    deadline = time.monotonic() + 180
    while "tokens/s" not in answer.inner_text():
        assert time.monotonic() < deadline, answer.inner_text()
        if button and page.locator("#call-approval").is_visible():
            decided(page, button)
        time.sleep(0.2)
    return answer_text(page)


def decided(page: Any, button: str) -> None:
    """Answer the call waiting with ``button``, and wait until the page took the answer: the question is gone, or
    another call is asked about already (the next one can follow within the time a look takes)."""
    approval, question = page.locator("#call-approval"), page.locator("#call-question")
    asked = shown_now(question)
    if not asked:  # the call was answered, or the answer ended, between the caller's look and this one
        return
    page.click(button)
    deadline = time.monotonic() + 30
    while approval.is_visible() and shown_now(question) == asked:
        assert time.monotonic() < deadline, f"the page still asks {asked!r} after {button} was pressed"
        time.sleep(0.1)


def shown_now(locator: Any) -> str:
    """What ``locator`` shows at this moment, or "" when it is not on the page: unlike ``inner_text`` this never
    waits, because the page removes the call's question as soon as the approval is hidden, which can fall between
    a look at the approval and a read of the question."""
    return " ".join(locator.all_inner_texts())


def kept_calls(app: RunningApp) -> list[list[dict[str, Any]]]:
    with sqlite3.connect(app.home / "conversations.db") as db:
        rows = db.execute("SELECT tool_calls FROM messages WHERE role = 'assistant' ORDER BY id").fetchall()
    return [json.loads(row[0]) if row[0] else [] for row in rows]


def test_stop_while_a_call_waits_ends_the_answer_and_runs_nothing(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    # Before the next test on the same hearth ui: that one allows the calculator for good.
    app = shared_app()
    before = len(kept_calls(app))
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    tools_on(page)
    send(page, "What is 9 times 8?")
    expect(page.locator("#call-question")).to_contain_text("Run calculator", timeout=120_000)
    page.click("#stop")
    expect(page.locator("#call-approval")).to_be_hidden(timeout=30_000)
    expect(page.locator("#send")).to_be_enabled(timeout=30_000)
    (calls,) = kept_calls(app)[before:]
    assert [c["allowed"] for c in calls] == [False]  # refused by Stop, never run


def test_calls_are_asked_about_allowed_denied_and_kept(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], artifacts_dir: Path
) -> None:
    app = shared_app()
    before = len(kept_calls(app))  # the calls of the module's earlier tests on this hearth ui
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    tools_on(page)

    send(page, QUESTION)
    question = page.locator("#call-question")
    expect(question).to_contain_text("Run calculator from built-in with", timeout=120_000)
    expect(page.locator("#chat [data-testid='bot']").last).to_contain_text("Tool call waiting for you")
    # Nothing has run yet: no call is kept (an assistant row may already be saved, empty, as seen once in the
    # suite; what matters is that no call is recorded before it is allowed).
    assert all(calls == [] for calls in kept_calls(app)[before:]), kept_calls(app)
    decided(page, "#allow-once")
    text = answered(page, "#allow-once")
    assert "Tool call: calculator (built-in) · " in text, text
    (first,) = kept_calls(app)[before:]
    assert first[0]["tool"] == "calculator" and first[0]["allowed"] is True
    assert first[0]["result"] != "The user did not allow this call."
    page.screenshot(path=str(artifacts_dir / "tool-call.png"))
    if target := os.environ.get("DOCS_TOOLS_SCREENSHOT"):
        shutil.copy(artifacts_dir / "tool-call.png", target)
    # Collapsed: the result opens from its line.
    summary = page.locator("#chat [data-testid='bot'] summary", has_text="Tool call: calculator").last
    summary.click()
    expect(page.locator("#chat [data-testid='bot']").last).to_contain_text("Result:")

    send(page, QUESTION)
    expect(question).to_contain_text("Run calculator", timeout=120_000)
    decided(page, "#deny-call")
    text = answered(page, "#deny-call")
    assert "Tool call: calculator (built-in) · refused" in text, text
    assert kept_calls(app)[before + 1][0]["allowed"] is False

    send(page, QUESTION)
    expect(question).to_contain_text("Run calculator", timeout=120_000)
    page.click("#allow-always")
    expect(page.locator("#call-approval")).to_be_hidden()
    answered(page)
    consent = json.loads((app.home / "tool-consent.json").read_text())
    assert ["built-in", "calculator"] in consent["always"]
    send(page, QUESTION)
    text = answered(page)  # allowed for good: run without asking
    assert "Tool call: calculator (built-in) · " in text and "refused" not in text.split("Tool call")[1]
    expect(page.locator("#call-approval")).to_be_hidden()

    page.reload()
    page.wait_for_selector("#message textarea")
    page.locator("#conversation-list label", has_text=QUESTION).first.click()
    expect(page.locator("#chat [data-testid='bot']").nth(1)).to_contain_text(
        "Tool call: calculator (built-in) · refused"
    )
    expect(page.locator("#chat [data-testid='bot']").first).to_contain_text("Tool call: calculator (built-in)")
    assert app.remote_requests == [], app.remote_requests


NOTES = {
    "keeper.md": "# The keeper\n\nThe last keeper of Skerry Light was Agnes Moll, who left in 1961.",
    "lamp.md": "# The lamp\n\nThe lamp burned paraffin until 1927, then ran on electricity from a cable.",
    "fog.md": "# The fog signal\n\nThe fog horn sounded two blasts every thirty seconds in thick weather.",
    "birds.md": "# Birds\n\nPuffins nest on the north cliff of the island from April to August.",
}
LISTED = re.compile(r"\[(\d+)\] (\S+\.md)")


def test_with_a_collection_the_model_searches_it_and_what_it_found_is_listed_with_the_sources(
    start_app: Callable[..., RunningApp],
    open_page: Callable[[RunningApp], Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    artifacts_dir: Path,
) -> None:
    """The calculator off, so the call made first is a search of the collection (the model's own words, so which
    passages it finds is the model's doing): every passage it was shown is listed under Sources with the number it
    was shown under, numbered on from the passages given with the question, after a reload too."""
    from tests.e2e.test_documents_page import create_collection, open_documents, pick_chat_collection, upload

    monkeypatch.setenv("HEARTH_TOOLS__CALCULATOR", "false")
    files = []
    for name, text in NOTES.items():
        (tmp_path / name).write_text(text)
        files.append(tmp_path / name)
    app = start_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    open_documents(page)
    create_collection(page, "Skerry")
    upload(page, files, expect="Added 4 files")
    pick_chat_collection(page, "Skerry")
    tools_on(page)

    send(page, "Who was the last keeper?")
    expect(page.locator("#call-question")).to_contain_text("Run search_documents from built-in", timeout=120_000)
    page.click("#allow-once")
    expect(page.locator("#call-approval")).to_be_hidden()  # the answer's stream hides it as the call runs
    text = answered(page, "#deny-call")  # one search is enough here
    assert "Tool call: search_documents (built-in) · " in text, text
    page.locator("#chat [data-testid='bot'] summary", has_text="Tool call: search_documents").first.click()
    shown = page.locator("#chat [data-testid='bot']").last.inner_text()
    calls, sources = shown.split("Sources", 1)
    found = dict(LISTED.findall(calls.split("Result:", 1)[1]))
    listed = dict(LISTED.findall(sources))
    assert found, shown  # the search found passages, each shown to the model with its number
    assert found.items() <= listed.items(), shown  # each listed under Sources, under the same number
    assert sorted(int(n) for n in listed) == list(range(1, len(listed) + 1))  # numbered on, no gap
    page.screenshot(path=str(artifacts_dir / "tool-search-documents.png"))

    page.reload()
    page.wait_for_selector("#message textarea")
    page.locator("#conversation-list label", has_text="Who was the last keeper?").first.click()
    again = page.locator("#chat [data-testid='bot']").last
    expect(again).to_contain_text("Sources")
    assert dict(LISTED.findall(again.inner_text().split("Sources", 1)[1])) == listed
    assert app.remote_requests == [], app.remote_requests
