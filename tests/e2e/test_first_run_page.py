"""The first run in a real browser: with only the embedded model, the Chat tab says it is the small built-in model,
offers the recommended one with its size and licence, says how to add a model without a network, and names the largest
current model from the hub that fits here; Install starts the Models tab's own install (one at a time), shows its
progress with a Cancel that appears only while it runs, and a cancelled install leaves nothing behind; once installed,
"Use it for chat" switches, and the status line says so without a reload."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from playwright.sync_api import expect

from app.desktop.geometry import DEFAULT_HEIGHT, DEFAULT_WIDTH
from app.paths import resolve_data_paths
from models.catalog import CATALOG, RECOMMENDED_CHAT, RUNTIME_OVERHEAD
from models.hub_catalog import HUB_CATALOG, best_fitting
from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY
from tests.e2e.test_models_tab import registered
from tests.helpers import QWEN25_CODER_05B, assembled_model, run_hearth

pytestmark = pytest.mark.e2e


def test_the_embedded_model_says_what_it_is_and_offers_the_recommended_one(
    silent_index: None,
    start_app: Callable[..., RunningApp],
    open_page: Callable[[RunningApp], Any],
    artifacts_dir: Path,
) -> None:
    app = start_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    note = page.locator("#first-run-text")
    expect(note).to_contain_text("small built-in model", timeout=30_000)
    expect(note).to_contain_text("Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) (1.0 GiB download, Apache-2.0)")
    expect(note).to_contain_text("Import a GGUF file")
    # The step after: the largest current model from the hub that leaves half the free memory to the rest.
    larger = best_fitting(
        HUB_CATALOG.values(), psutil.virtual_memory().available, RUNTIME_OVERHEAD, CATALOG[RECOMMENDED_CHAT].size_bytes
    )
    if larger is not None:
        expect(note).to_contain_text(f"This computer also has room for {larger.title}")
        expect(note).to_contain_text("Install a current model from the Hugging Face Hub")
    else:
        expect(note).not_to_contain_text("Hugging Face")
    expect(page.locator("#first-run-cancel")).to_be_hidden()
    page.screenshot(path=str(artifacts_dir / "first-run.png"))
    # At the desktop window's default size, the note does not push the message box out of view.
    page.set_viewport_size({"width": DEFAULT_WIDTH, "height": DEFAULT_HEIGHT})
    page.wait_for_function(
        "() => document.querySelector('#composer').getBoundingClientRect().bottom <= window.innerHeight",
        timeout=5_000,
    )
    page.wait_for_timeout(300)  # the screenshot after the layout has settled
    page.screenshot(path=str(artifacts_dir / "first-run-window-size.png"))
    before = registered(app)

    page.click("#first-run-install")
    progress = page.locator("#first-run-progress")
    expect(progress).to_contain_text("Installing Qwen2.5-Coder-1.5B-Instruct", timeout=30_000)
    expect(page.locator("#first-run-install")).to_be_hidden()
    page.locator("#first-run-progress").filter(has_text="Downloading").or_(
        page.locator("#first-run-progress").filter(has_text="Assembling")
    ).wait_for(timeout=60_000)
    page.click("#first-run-cancel")
    expect(progress).to_contain_text("cancelled; nothing was added", timeout=15_000)
    expect(page.locator("#first-run-cancel")).to_be_hidden()
    expect(page.locator("#first-run-install")).to_be_visible()
    assert registered(app) == before
    models_dir = resolve_data_paths(app.home).models_dir
    assert not models_dir.exists() or list(models_dir.iterdir()) == []


def test_use_it_for_chat_switches_and_the_status_line_names_the_new_model_without_a_reload(
    start_app: Callable[..., RunningApp],
    open_page: Callable[[RunningApp], Any],
    embedded_model: Path,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The recommended model installed but the built-in one answering: "Use it for chat" loads it, and the line at
    the top of the page names it as soon as it answers (it went on naming the built-in one until a reload). The
    recommended model is set to the small packaged Qwen the tests have (``model.recommended``)."""
    model = assembled_model(QWEN25_CODER_05B)
    monkeypatch.setenv("HEARTH_MODEL__RECOMMENDED", QWEN25_CODER_05B)
    imported = run_hearth(isolated_home, "models", "import", str(model))
    assert imported.returncode == 0, imported.stderr
    app = start_app("--model", str(embedded_model))
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    status = page.locator("#status-line")
    expect(status).to_contain_text("SmolLM2")
    expect(page.locator("#first-run-use")).to_be_visible(timeout=30_000)
    page.click("#first-run-use")
    title = CATALOG[QWEN25_CODER_05B].title
    expect(page.locator("#first-run-progress")).to_contain_text(f"Chat now uses {title}", timeout=180_000)
    expect(status).to_contain_text(title, timeout=15_000)
    expect(status).not_to_contain_text("SmolLM2")
