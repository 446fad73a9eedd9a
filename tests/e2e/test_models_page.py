"""The Models tab in a real browser: import a GGUF by path, quantize, use it for chat, the ladder, remove."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, send
from tests.helpers import GEMMA3_270M, assembled_model

pytestmark = pytest.mark.e2e


def cell(page: Any, text: str) -> Any:
    return page.locator("#models-table [role=gridcell]", has_text=text).first


def pick(page: Any, label_start: str) -> None:
    page.click("#model-pick input")
    page.get_by_role("option").filter(has_text=label_start).first.click()


@pytest.mark.timeout(900)  # quantizing and measuring a ladder on a busy 2-core machine takes minutes
def test_import_quantize_use_ladder_and_remove(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    gemma = assembled_model(GEMMA3_270M)
    app = start_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.get_by_role("tab", name="Models").click()
    cell(page, "SmolLM2-135M-Instruct").wait_for(timeout=30_000)
    cell(page, "in use").wait_for(timeout=30_000)

    page.click("#import-accordion button")
    page.locator("#import-path textarea, #import-path input").first.fill(str(gemma))
    page.click("#import-model")
    cell(page, "270m").wait_for(timeout=30_000)

    pick(page, "SmolLM2-135M-Instruct Q4_1")
    page.click("#quantize-accordion button")
    page.click("#quantize")  # a Q4_1 model: refused without the re-quantize box
    page.locator("#quantize-progress", has_text="Allow re-quantizing").wait_for(timeout=30_000)
    page.click("#allow-requantize input")
    page.click("#qtype input")
    page.get_by_role("option", name="Q8_0", exact=True).click()
    page.click("#quantize")
    page.locator("#quantize-progress", has_text="Made SmolLM2-135M-Instruct (Q8_0)").wait_for(timeout=120_000)
    cell(page, "Q8_0").wait_for(timeout=10_000)

    page.click("#use-model")  # the new Q8_0 copy is selected after quantizing
    try:
        page.locator("#job-progress", has_text="Chat now uses it").wait_for(timeout=120_000)
    except PlaywrightTimeout:  # say what the page showed instead, and how the app's log ends
        shown, log = page.inner_text("#job-progress"), app.log.read_text(errors="replace")[-3000:]
        raise AssertionError(f"not loaded; the page shows {shown!r}; the app's log ends:\n{log}") from None
    assert "SmolLM2-135M-Instruct (Q8_0)" in page.inner_text("#status-line")
    assert "your choice" in page.inner_text("#models-in-use")
    page.get_by_role("tab", name="Chat").click()
    send(page, "Name a fruit.")
    page.locator("#chat [data-testid='bot']").last.filter(has_text="tokens/s").wait_for(timeout=120_000)

    page.get_by_role("tab", name="Models").click()
    pick(page, "SmolLM2-135M-Instruct Q4_1")
    page.click("#ladder-types label:has-text('Q8_0')")  # leave only Q4_K_M and Q4_0 ticked…
    page.click("#ladder-types label:has-text('Q4_K_M')")  # …then only Q4_0
    page.locator("#ladder-runs input[type=number]").fill("2")
    page.locator("#ladder-runs input[type=number]").press("Enter")
    page.click("#ladder-copies label:has-text('Remove them after measuring')")
    page.click("#ladder")
    # The copies appear in the catalog as they are made, named by their type, without a reload…
    cell(page, "SmolLM2-135M-Instruct Q4_0 · ladder copy").wait_for(timeout=300_000)
    page.locator("#ladder-progress", has_text="Done: 2 rungs measured").wait_for(timeout=300_000)
    rows = page.locator("#ladder-table [role=row][aria-rowindex]:has([role=gridcell])")
    assert rows.count() == 2
    assert "–" in rows.first.inner_text()  # each speed is a median with its range over the runs
    assert page.locator("#ladder-chart img").count() == 1
    # …and are removed after measuring, as chosen.
    cells = "Array.from(document.querySelectorAll('#models-table [role=gridcell]'))"
    page.wait_for_function(f"!{cells}.some(c => c.innerText.includes('ladder copy'))", timeout=30_000)
    # The ladder's progress sits right above its table.
    gap = page.evaluate(
        "document.querySelector('#ladder-table').getBoundingClientRect().top"
        " - document.querySelector('#ladder-progress').getBoundingClientRect().bottom"
    )
    assert 0 <= gap < 80

    pick(page, "Gemma 3 270M")
    page.click("#remove-model")
    page.wait_for_function(f"!{cells}.some(c => c.innerText.includes('270m'))", timeout=30_000)
    assert gemma.exists()  # imported in place: never deleted
    assert app.remote_requests == []
