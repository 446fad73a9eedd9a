"""Take the README's screenshots from a real `hearth ui` and headless Chromium, so they show the current page.

    HEARTH_HOME=DIR .venv/bin/python docs/screenshots.py --collection NAME --question "…" --cited-question "…" \
        [--attach FILE --attach-question "…"] [--tool-question "…"] [--only-attach]

DIR is a data folder as a user has it after `make run` (the default model installed, a collection indexed from
real documents). Writes docs/screenshot.png (a plain answer), docs/cited-answer.png (an answer from the
collection with its first source opened) and, with --attach, docs/attached-file.png (a new chat with FILE dropped
on the message box), and with --tool-question, docs/tool-call.png (tools on, the calculator's call allowed once,
its line opened above the answer). --only-attach leaves the first two as they are. Needs the dev extras
(Playwright) and Debian's chromium.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ANSWER_TIMEOUT_MS = 600_000  # the default model on a 2-core machine, with a long prompt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", required=True, help="collection for the cited answer")
    parser.add_argument("--question", required=True, help="a plain question (no documents)")
    parser.add_argument("--cited-question", required=True, help="a question the collection answers")
    parser.add_argument("--attach", type=Path, help="a file to attach to a new chat (the third screenshot)")
    parser.add_argument("--attach-question", help="the question asked with --attach")
    parser.add_argument("--tool-question", help="a question for the calculator, asked with tools on")
    parser.add_argument("--only-attach", action="store_true", help="leave out the first two screenshots")
    parser.add_argument("--out", type=Path, default=DOCS, help="folder for the PNGs (default docs/)")
    args = parser.parse_args()
    if "HEARTH_HOME" not in os.environ:
        parser.error("set HEARTH_HOME to the data folder to show")
    chromium = shutil.which("chromium")
    if chromium is None:
        parser.error("chromium is not installed: apt-get install -y chromium")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        app = subprocess.Popen(
            [sys.executable, "-m", "app", "ui", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            shoot(wait_for_start(Path(log.name)), chromium, args)
        finally:
            app.terminate()
            app.wait(timeout=30)
    return 0


def wait_for_start(log: Path) -> str:
    """The address `hearth ui` printed for its owner (with this start's page secret)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        printed = re.search(r"Hearth is running at (\S+)", log.read_text())
        if printed:
            return printed.group(1)
        time.sleep(0.5)
    raise SystemExit(f"hearth ui did not start:\n{log.read_text()}")


def shoot(url: str, chromium: str, args: argparse.Namespace) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        page.wait_for_selector("#status-line:has-text('offline')", timeout=300_000)
        if not args.only_attach:
            ask(page, args.question)
            page.screenshot(path=str(args.out / "screenshot.png"))

            page.click("#new-chat")
            page.click("#chat-collection input")
            page.get_by_role("option", name=args.collection).click()
            ask(page, args.cited_question)
            open_cited_source(page)
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(args.out / "cited-answer.png"))
        if args.attach:
            page.click("#new-chat")
            page.set_input_files("#message input[type=file]", [str(args.attach)])
            page.locator("#pending-files").filter(has_text=args.attach.name).wait_for(timeout=60_000)
            ask(page, args.attach_question or "What is this file about?")
            open_cited_source(page)
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(args.out / "attached-file.png"))
        if args.tool_question:
            page.click("#new-chat")
            page.click("#chat-tools input")
            page.get_by_role("option", name="Tools: the model decides").click()
            page.fill("#message textarea", args.tool_question)
            page.click("#send")
            page.locator("#call-question").filter(has_text="calculator").wait_for(timeout=ANSWER_TIMEOUT_MS)
            page.click("#allow-once")
            answer = page.locator("#chat [data-testid='bot']").last
            answer.filter(has_text="tokens/s").wait_for(timeout=ANSWER_TIMEOUT_MS)
            answer.locator("summary", has_text="Tool call").first.click()
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(args.out / "tool-call.png"))
        browser.close()


def open_cited_source(page: Any) -> None:
    """Open, under the last answer, the source its first citation names (the first source if it cites none)."""
    answer = page.locator("#chat [data-testid='bot']").last
    cited = re.search(r"\[(\d+)\]", answer.inner_text().split("Sources")[0])
    sources = answer.locator("details summary")
    index = int(cited.group(1)) - 1 if cited else 0
    sources.nth(index if 0 <= index < sources.count() else 0).click()


def ask(page: Any, question: str) -> None:
    page.fill("#message textarea", question)
    page.click("#send")
    page.locator("#chat [data-testid='bot']").last.filter(has_text="tokens/s").wait_for(timeout=ANSWER_TIMEOUT_MS)


if __name__ == "__main__":
    raise SystemExit(main())
