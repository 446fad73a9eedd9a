"""The Models tab's Hugging Face Hub section in a real browser, against a hub the test serves on loopback
(tests/hub_server.py) with HF_ENDPOINT pointing `hearth ui` at it: the curated models listed with what each needs
here, a search that lists a repository's files, Install with its progress, Stop midway, and after a restart the
section naming the unfinished download so that one press of Install goes on from where it stopped (an HTTP Range
request) and the model joins the catalog."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_models_tab import cell, pick
from tests.helpers import write_tiny_gguf
from tests.hub_server import FakeHub, HostedFile, Repo, hub_serving

pytestmark = pytest.mark.e2e

REPO = "makers/Tiny-GGUF"
FILE = "tiny-Q4_K_M.gguf"


def open_models(app: RunningApp, open_page: Callable[[RunningApp], Any]) -> Any:
    """The Models tab of a Hearth running the demo engine (no model to load: this test is about installing)."""
    page = open_page(app)
    page.wait_for_selector("#status-line:has-text('offline')", timeout=60_000)
    page.get_by_role("tab", name="Models").click()
    cell(page, "#models-table", "SmolLM2-135M-Instruct").wait_for(timeout=30_000)
    return page


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """Two files of one repository; the Q4_K_M one sent slowly enough to be stopped midway (about 6 s)."""
    slow = write_tiny_gguf(tmp_path / "q4.gguf", tensors=64).read_bytes()
    other = write_tiny_gguf(tmp_path / "q8.gguf", tensors=8).read_bytes()
    files = {FILE: HostedFile(slow, pace_s=0.2), "tiny-Q8_0.gguf": HostedFile(other)}
    with hub_serving({REPO: Repo(files, downloads=7)}) as served:
        for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_HUB_DISABLE_TELEMETRY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        yield served


def test_search_install_stop_and_go_on_after_a_restart(
    start_app: Callable[..., RunningApp],
    open_page: Callable[[RunningApp], Any],
    hub: FakeHub,
    artifacts_dir: Path,
) -> None:
    app = start_app("--backend", "fake")
    page = open_models(app, open_page)
    curated = page.locator("#hub-table [role=row]", has_text="Qwen3-4B-Instruct-2507")
    curated.wait_for(timeout=30_000)
    assert "Q4_K_M" in curated.inner_text() and "needs about" in curated.inner_text()
    assert hub.requests == []  # opening the tab asks the hub nothing
    page.locator("#hub-accordion").screenshot(path=str(artifacts_dir / "hub-section.png"))

    page.locator("#hub-query textarea, #hub-query input").first.fill("tiny")
    page.click("#hub-search")
    expect(page.locator("#hub-progress")).to_contain_text("2 files in 1 repository match 'tiny'", timeout=30_000)
    cell(page, "#hub-table", FILE).wait_for(timeout=10_000)
    page.screenshot(path=str(artifacts_dir / "hub-search.png"), full_page=True)

    pick(page, "#hub-pick", f"{REPO} — {FILE}")
    page.click("#hub-install")
    expect(page.locator("#hub-progress")).to_contain_text(re.compile(r"Downloading .*\d+%"), timeout=30_000)
    page.click("#cancel-hub")
    stopped = page.locator("#hub-progress")
    expect(stopped).to_contain_text(f"Downloading {FILE} was stopped at", timeout=30_000)
    expect(stopped).to_contain_text("Install it again from the Models tab: it goes on from where it stopped.")
    expect(page.locator("#cancel-hub")).to_be_hidden()
    kept = list((app.home / "models" / ".downloads").glob("*.partial"))
    kept_bytes = kept[0].stat().st_size if len(kept) == 1 else 0
    assert 0 < kept_bytes < len(hub.repos[REPO].files[FILE].data), kept

    app.stop()
    again = start_app("--backend", "fake", home=app.home, port=app.port)
    page = open_models(again, open_page)
    said = page.locator("#hub-progress")
    expect(said).to_contain_text(f"The download of {FILE} stopped at", timeout=30_000)
    expect(said).to_contain_text("press Install to go on from there")
    expect(page.locator("#hub-pick input")).to_have_value(re.compile(f"^{REPO} — {FILE}"))
    page.click("#hub-install")
    expect(said).to_contain_text(f"Installed {FILE} as", timeout=60_000)
    installed = page.locator("#hub-table [role=row]", has_text=FILE).locator("[role=gridcell]").last
    expect(installed).to_have_text("yes", timeout=10_000)  # the Installed column
    resumed = [r for method, path, r in hub.requests if method == "GET" and path.endswith(f"/resolve/main/{FILE}")]
    assert resumed[-1] == f"bytes={kept_bytes}-", resumed  # asked for the rest only
    assert list((again.home / "models" / ".downloads").iterdir()) == []  # nothing left over
    page.screenshot(path=str(artifacts_dir / "hub-installed.png"), full_page=True)
    assert app.remote_requests == [] and again.remote_requests == []
