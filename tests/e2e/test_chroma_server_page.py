"""The Documents tab's Chroma server section in a real browser, against a real `hearth ui` and a real `chroma run`
on loopback started here: connected from the page, new collections are made on the server (and say so), the choice
survives a restart, and "Use the data folder only" puts new collections back in the data folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.chroma_servers import ChromaProcess, chroma_running
from tests.e2e.conftest import RunningApp
from tests.e2e.test_documents_page import create_collection, open_documents

pytestmark = pytest.mark.e2e


@pytest.fixture
def chroma(tmp_path: Path) -> Iterator[ChromaProcess]:
    with chroma_running(tmp_path / "chroma-data") as running:
        yield running


def open_section(page: Any) -> None:
    open_documents(page)
    page.get_by_text("Chroma server", exact=True).first.click()
    page.wait_for_selector("#chroma-address input, #chroma-address textarea", timeout=15_000)


def test_collections_go_to_a_server_connected_from_the_page_and_back(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], chroma: ChromaProcess, tmp_path: Path
) -> None:
    app = start_app()
    page = open_page(app)
    open_section(page)
    status = page.locator("#chroma-server-status")
    expect(status).to_contain_text("kept in this computer's data folder", timeout=30_000)
    page.locator("#chroma-address input, #chroma-address textarea").first.fill("http://127.0.0.1:9")
    page.click("#chroma-connect")
    refused = page.get_by_text("did not answer").first
    expect(refused).to_be_visible(timeout=60_000)  # nothing there: not kept
    expect(page.get_by_text("Nothing was changed").first).to_be_visible()
    expect(status).to_contain_text("kept in this computer's data folder")
    expect(refused).to_be_hidden(timeout=30_000)  # the message goes by itself

    # A one-line file outside the data folder (another program's key) is never sent as the server's token.
    key = tmp_path / "another-programs-key"
    key.write_text("sk-not-for-chroma\n")
    key.chmod(0o600)
    page.locator("#chroma-address input, #chroma-address textarea").first.fill(chroma.url)
    page.locator("#chroma-token input, #chroma-token textarea").first.fill(str(key))
    page.click("#chroma-connect")
    outside = page.get_by_text("outside Hearth's data folder").first
    expect(outside).to_be_visible(timeout=60_000)
    expect(page.get_by_text(f"file of its own in {app.home}").first).to_be_visible()
    expect(status).to_contain_text("kept in this computer's data folder")
    assert not (app.home / "chroma-server.json").exists()
    page.locator("#chroma-token input, #chroma-token textarea").first.fill("")

    page.locator("#chroma-address input, #chroma-address textarea").first.fill(chroma.url)
    page.click("#chroma-connect")
    expect(status).to_contain_text(f"made on the Chroma server {chroma.url}", timeout=60_000)
    create_collection(page, "team manuals")
    expect(page.locator("#collection-summary")).to_contain_text(f"on the Chroma server {chroma.url}")
    page.screenshot(path=str(tmp_path / "chroma-server-section.png"), full_page=True)  # for a look by hand

    app.stop()  # the choice is kept in the data folder: a restart uses it
    again = start_app(port=app.port)
    page = open_page(again)
    open_section(page)
    status = page.locator("#chroma-server-status")
    expect(status).to_contain_text(f"made on the Chroma server {chroma.url}", timeout=30_000)
    page.click("#chroma-disconnect")
    expect(status).to_contain_text("kept in this computer's data folder", timeout=60_000)
    create_collection(page, "my notes")
    expect(page.locator("#collection-summary")).not_to_contain_text("Chroma server")
    assert again.remote_requests == []
