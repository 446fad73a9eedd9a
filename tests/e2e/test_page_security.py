"""Answers, questions, stored conversations and quoted passages full of remote images and raw HTML, rendered by a
real `hearth ui` in a real Chromium: not one request leaves the page's origin, and the page's Content-Security-
Policy never has to refuse anything (the rewriting alone holds). The addresses point at a second listener on
127.0.0.1, so a request that got through would be counted there as well as by the browser."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.page_headers import CONTENT_SECURITY_POLICY
from app.paths import ensure_data_dir, resolve_data_paths
from app.services.library.conversations import AnswerStats, ConversationStore
from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import answer_text, send, watch_answer
from tests.e2e.test_documents_page import create_collection, open_documents, upload
from tests.hostile_markdown import hostile_markdown

pytestmark = pytest.mark.e2e

STATUS_READY = "#status-line:has-text('offline')"
FINISHED = "tokens/s"
COLLECTION = "hostile-notes"
PIXEL = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")  # a PNG header is enough


@dataclass
class Listener:
    """An HTTP server that is not the app: anything the page fetches from it is a leak."""

    base: str
    hits: list[str] = field(default_factory=list)

    @property
    def authority(self) -> str:
        return self.base.split("//", 1)[1]


@pytest.fixture
def listener() -> Iterator[Listener]:
    found: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(PIXEL)))
            self.end_headers()
            self.wfile.write(PIXEL)

        do_POST = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Listener(f"http://127.0.0.1:{server.server_address[1]}", found)
    finally:
        server.shutdown()
        server.server_close()


def assert_nothing_left_the_page(app: RunningApp, listener: Listener) -> None:
    leaked = sorted(set(listener.hits))
    assert not leaked, f"the page fetched from another origin: {leaked}"
    assert app.remote_requests == []
    assert not app.csp_violations, f"the page tried to load what its policy refuses: {app.csp_violations}"


def test_the_listener_counts_what_reaches_it(listener: Listener) -> None:
    assert httpx.get(f"{listener.base}/probe.png").content == PIXEL
    assert listener.hits == ["/probe.png"]


def test_hostile_questions_and_answers_fetch_nothing_live_or_reopened(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], listener: Listener
) -> None:
    payloads = hostile_markdown(listener.base)
    # Shared with the policy test further down, which runs after it (it ends by making the page break its policy).
    app = shared_app("--backend", "fake")
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    shown: dict[str, str] = {}
    for name, payload in payloads.items():
        # The demo model answers with the question, so each payload is both a question and a streamed answer.
        send(page, payload)
        shown[name] = watch_answer(page, lambda text: FINISHED in text, timeout_s=30)[-1]
    # The same conversation read back from the database, after a reload.
    page.reload()
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.locator("#conversation-list label").first.click()
    page.wait_for_function(
        "n => document.querySelectorAll('#chat [data-testid=\"bot\"]').length >= n", arg=len(payloads)
    )
    page.wait_for_timeout(1000)  # give any image the page was tricked into a moment to be requested
    assert_nothing_left_the_page(app, listener)
    assert [name for name, text in shown.items() if listener.authority not in text] == []  # shown as text


def ingest(home: Path, document: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "ingest", "--collection", COLLECTION, str(document)],
        env=os.environ | {"HEARTH_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def store_conversation(home: Path, title: str, text: str) -> None:
    store = ConversationStore(ensure_data_dir(resolve_data_paths(home)).conversations_db)
    try:
        conversation = store.create("Be brief.", title=title)
        store.append(conversation.id, "user", text)
        store.append(conversation.id, "assistant", text, AnswerStats(5, 5, 10.0, 50.0, "stop"))
    finally:
        store.close()


def test_stored_answers_and_quoted_passages_fetch_nothing(
    start_app: Callable[..., RunningApp],
    open_page: Callable[[RunningApp], Any],
    listener: Listener,
    isolated_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    payloads = hostile_markdown(listener.base)
    # Multi-line forms (reference definitions, fences, list items) reach the page whole only from storage and from
    # documents: the demo model answers on one line.
    document = tmp_path / "keeper-notes.md"
    notes = [f"## Keeper note {name}\n\nThe lighthouse keeper wrote:\n\n{text}" for name, text in payloads.items()]
    document.write_text("\n\n".join(notes))
    ingest(isolated_home, document)
    store_conversation(isolated_home, "Stored hostile answer", "\n\n".join(payloads.values()))
    monkeypatch.setenv("HEARTH_RAG__TOP_K", "50")  # every passage of the document under the answer
    monkeypatch.setenv("HEARTH_MODEL__CONTEXT_LENGTH", "8192")  # and room to echo them all
    monkeypatch.setenv("HEARTH_GENERATION__MAX_NEW_TOKENS", "2048")
    app = start_app("--backend", "fake")
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)

    page.locator("#conversation-list label", has_text="Stored hostile answer").click()
    page.wait_for_selector("#chat [data-testid='bot']", timeout=15_000)
    assert listener.authority in answer_text(page)
    page.wait_for_timeout(1000)
    assert_nothing_left_the_page(app, listener)

    page.click("#new-chat")
    page.click("#chat-collection input")
    page.get_by_role("option", name=COLLECTION).click()
    send(page, "What did the lighthouse keeper write?")
    # The demo model echoes its prompt, passages included: the document comes back as the answer, then the
    # passages themselves are listed under it.
    final = watch_answer(page, lambda text: FINISHED in text, timeout_s=120)[-1]
    assert listener.authority in final and "Sources" in final
    assert [name for name in payloads if f"Keeper note {name}" not in final] == []  # every passage is quoted
    summaries = page.locator("#chat [data-testid='bot']").last.locator("details summary")
    assert summaries.count() >= 2
    for index in range(summaries.count()):
        summaries.nth(index).click()  # open every quoted passage
    page.wait_for_timeout(1000)
    assert_nothing_left_the_page(app, listener)


INJECT_REMOTE_LOADS = """base => {
    document.body.insertAdjacentHTML('beforeend', `
        <img src="${base}/img.png"><video poster="${base}/poster.png"></video>
        <link rel="stylesheet" href="${base}/style.css">
        <div style="background-image: url(${base}/background.png)">x</div>
        <style>@font-face { font-family: leak; src: url(${base}/font.woff); } .leak { font-family: leak; }</style>
        <p class="leak">x</p>`);
    fetch(`${base}/fetch`).catch(() => {});
}"""


def test_every_response_carries_the_policy_and_the_page_works_under_it(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], listener: Listener, tmp_path: Path
) -> None:
    app = shared_app("--backend", "fake")
    owner = httpx.Client(cookies=app.cookies)
    page_html = owner.get(app.url)
    script = re.search(r'src="\./(assets/[^"]+\.js)"', page_html.text)
    assert script is not None
    replies = [
        page_html,
        owner.get(f"{app.url}{script.group(1)}"),
        owner.get(f"{app.url}config"),
        owner.get(f"{app.url}gradio_api/info"),
        owner.get(f"{app.url}v1/models"),  # refused: no key
        owner.get(app.url, headers={"Host": "evil.example"}),  # refused by the guard
    ]
    assert [reply.status_code for reply in replies] == [200, 200, 200, 200, 401, 403]
    for reply in replies:
        assert reply.headers["content-security-policy"] == CONTENT_SECURITY_POLICY, reply.url
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["referrer-policy"] == "no-referrer"

    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    send(page, "Hello **there**, with `code`:\n\n- one\n- two")
    watch_answer(page, lambda text: FINISHED in text, timeout_s=30)
    answer = page.locator("#chat [data-testid='bot']").last
    assert answer.locator("strong").inner_text() == "there" and answer.locator("code").inner_text() == "code"
    for tab, shown in (("Models", "#models-table"), ("Hardware", "#plan"), ("Chat", "#message")):
        page.get_by_role("tab", name=tab).click()
        page.locator(shown).first.wait_for(state="visible", timeout=30_000)
    # gr.HTML renders through Function(): the Hardware tab's plan shows only if the policy allows it.
    page.get_by_role("tab", name="Hardware").click()
    page.wait_for_function("() => document.querySelector('#plan').innerText.trim().length > 0", timeout=60_000)
    open_documents(page)
    create_collection(page, "notes")
    document = tmp_path / "notes.md"
    document.write_text("# Notes\n\nThe lighthouse was built in 1852.\n")
    upload(page, [document], expect="Added 1 file")
    assert app.csp_violations == [] and app.remote_requests == []

    # The policy holds on its own: markup put straight into the page (past the Markdown rewriting) loads nothing.
    page.evaluate(INJECT_REMOTE_LOADS, listener.base)
    page.wait_for_timeout(1000)
    assert listener.hits == []
    refused = " ".join(app.csp_violations)
    for name in ("img.png", "poster.png", "style.css", "background.png", "font.woff", "fetch"):
        assert f"{listener.base}/{name}" in refused, name
