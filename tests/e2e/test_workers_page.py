"""Workers on the Hardware tab, in a real browser with a real `hearth worker`: none paired says how to pair; a wrong
code is refused and used up; the code the worker prints next pairs it and the table shows it online; the backend
picker then splits the model onto it over the TLS link and the chat answers; a stopped worker shows offline with
the reason, and Remove forgets it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from backends.workers.pairing import WRONG_BLOCK_S
from tests.e2e.conftest import RunningApp, free_port
from tests.e2e.test_chat_page import STATUS_READY, answer_text, send
from tests.e2e.test_hardware_page import choose
from tests.helpers import start_worker

pytestmark = pytest.mark.e2e

SPLIT = "Split across the paired workers (llama.cpp RPC)"


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A worker with a data folder of its own, as on another machine: its address and its process."""
    port = free_port()
    process = start_worker(tmp_path / "worker-home", port, "--threads", "1")
    try:
        yield f"127.0.0.1:{port}", process
    finally:
        process.terminate()
        process.wait(timeout=15)


def _codes(process: subprocess.Popen[str]) -> Iterator[str]:
    """Each pairing code the worker prints, as it prints it."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("pairing code: "):
            yield line.removeprefix("pairing code: ").strip()


def _pair(page: Any, address: str, code: str, outcome: str) -> str:
    """Pair through the page and wait for the note that starts with ``outcome``."""
    page.fill("#worker-address textarea, #worker-address input", address)
    page.fill("#worker-code textarea, #worker-code input", code)
    page.click("#pair-worker")
    page.locator("#workers-note", has_text=outcome).wait_for(timeout=60_000)
    return str(page.inner_text("#workers-note"))


def test_a_worker_is_paired_used_and_removed_from_the_page(
    start_app: Callable[..., RunningApp],
    open_page: Callable[[RunningApp], Any],
    embedded_model: Path,
    worker: tuple[str, subprocess.Popen[str]],
    artifacts_dir: Path,
) -> None:
    address, process = worker
    codes = _codes(process)
    first = next(codes)
    app = start_app("--model", str(embedded_model))
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.get_by_role("tab", name="Hardware").click()
    page.locator("#workers", has_text="No worker is paired").wait_for(timeout=30_000)
    page.click("#backend-choice input")
    assert "no worker is paired" in page.get_by_role("option", name=SPLIT).inner_text()
    page.keyboard.press("Escape")

    wrong = "AAAA-AAAA" if first != "AAAA-AAAA" else "BBBB-BBBB"
    refused = _pair(page, address, wrong, "Not paired:")
    assert "Not paired:" in refused and "Wrong or already used pairing code." in refused
    assert page.input_value("#worker-code textarea, #worker-code input") == ""  # a code pairs once: emptied
    fresh = next(codes)  # the worker printed a new one after the wrong try
    time.sleep(WRONG_BLOCK_S)  # and takes no code from where a wrong one came for this long
    paired = _pair(page, address, fresh, "Paired with")
    assert f"Paired with the worker at {address}" in paired
    row = page.locator("#workers tbody tr")
    assert row.count() == 1 and "online" in row.inner_text() and address in row.inner_text()
    assert "ms" in row.inner_text() and "Hearth " in row.inner_text()
    page.screenshot(path=str(artifacts_dir / "workers-tab.png"), full_page=True)

    # The picker offers the split now, the model goes onto the worker (over its TLS link), and the chat answers.
    choose(page, "#backend-choice", SPLIT)
    page.click("#switch")
    page.locator("#switch-progress", has_text="Now running on").wait_for(timeout=120_000)
    assert "split across 1 worker" in page.inner_text("#switch-progress")
    assert address in page.inner_text("#plan-bars")  # the worker's share of the model, in its bar
    page.click("#plan-details summary")  # which layers go where: under Details
    assert "layers 0-" in page.inner_text("#plan-reasons")
    page.get_by_role("tab", name="Chat").click()
    send(page, "Name a primary colour.")
    expect(page.locator("#stop")).to_be_disabled(timeout=120_000)  # the answer ended
    assert answer_text(page).strip()

    # Stopped, it shows offline with the reason; Remove forgets it.
    process.terminate()
    process.wait(timeout=15)
    page.get_by_role("tab", name="Hardware").click()
    page.click("#check-workers")
    page.locator("#workers", has_text="offline").wait_for(timeout=60_000)
    assert f"The worker at {address} does not answer" in page.inner_text("#workers")
    page.click("#remove-worker")
    page.locator("#workers-note", has_text=f"Removed the worker at {address}").wait_for(timeout=30_000)
    page.locator("#workers", has_text="No worker is paired").wait_for(timeout=30_000)
