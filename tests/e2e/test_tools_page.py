"""The Tools tab in a real browser against a real `hearth ui` and a real MCP server written with the official SDK
(tests/mcp/demo_server.py): none added says how; a server is added from its command and its tools are listed; a
server that fails shows what it printed; a token typed for an address is never shown again; switching off,
removing, and asking again about a tool allowed for good all work and last across a restart."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RunningApp

pytestmark = pytest.mark.e2e

DEMO = Path(__file__).parents[1] / "mcp" / "demo_server.py"
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"


def open_tools(page: Any) -> None:
    page.get_by_role("tab", name="Tools").click()
    page.wait_for_selector("#tool-server-name textarea, #tool-server-name input", timeout=15_000)


def add_server(page: Any, name: str, target: str, token: str = "") -> str:
    page.locator("#tool-server-name textarea, #tool-server-name input").first.fill(name)
    page.locator("#tool-server-target textarea, #tool-server-target input").first.fill(target)
    if token:
        page.locator("#tool-server-token input").first.fill(token)
    page.click("#add-tool-server")
    note = page.locator("#tools-note").filter(has_text=name)
    note.wait_for(timeout=90_000)
    return str(note.inner_text())


def servers_table(page: Any) -> dict[str, list[str]]:
    rows = page.locator("#tools-servers table.tools tbody tr")
    result = {}
    for i in range(rows.count()):
        cells = [c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
        result[cells[0]] = cells[1:]
    return result


def test_servers_are_added_listed_switched_removed_and_allowed_tools_asked_about_again(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = start_app()
    # A tool allowed for good earlier (in the terminal): listed here, and can be asked about again.
    (app.home / "tool-consent.json").write_text(json.dumps({"always": [["demo", "add"], ["built-in", "calculator"]]}))
    page = open_page(app)
    open_tools(page)
    page.locator("#tools-servers", has_text="No MCP server is added").wait_for(timeout=30_000)

    note = add_server(page, "demo", f"{sys.executable} {DEMO}")
    assert "Added demo" in note, note
    page.locator("#tools-servers td", has_text="lighthouse_keeper").wait_for(timeout=60_000)
    rows = servers_table(page)
    assert rows["demo"][0] == "on" and "add, lighthouse_keeper" in rows["demo"][2], rows
    assert page.input_value("#tool-server-target textarea, #tool-server-target input") == ""

    note = add_server(page, "broken", "sh -c 'echo cannot open /etc/notes.toml >&2; exit 3'")
    page.locator("#tools-servers td", has_text="It printed: cannot open /etc/notes.toml").wait_for(timeout=60_000)
    assert servers_table(page)["broken"][0] == "not working"

    secret = "tok-e2e-5f1c9a"
    note = add_server(page, "remote", "http://127.0.0.1:9/mcp", token=secret)
    assert "Added remote" in note
    page.locator("#tools-servers td", has_text="(with a token)").first.wait_for(timeout=60_000)
    assert secret not in page.content()
    assert page.input_value("#tool-server-token input") == ""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "tools-tab.png"), full_page=True)

    refused = add_server(page, "demo", "true")
    assert "Not added: An MCP server called 'demo' is already added" in refused, refused
    assert "pick it under Server, press Remove" in refused and "hearth mcp" not in refused  # the page's words

    page.click("#tool-server-chosen input")
    page.get_by_role("option", name="broken").click()
    page.click("#switch-tool-server")
    page.locator("#tools-note", has_text="broken is off").wait_for(timeout=30_000)
    assert servers_table(page)["broken"][0] == "off"
    page.click("#tool-server-chosen input")
    page.get_by_role("option", name="remote").click()
    page.click("#remove-tool-server")
    page.locator("#tools-note", has_text="Removed remote").wait_for(timeout=30_000)
    assert sorted(servers_table(page)) == ["broken", "demo"]

    page.click("#tools-allowed input")
    page.get_by_role("option", name="add (demo)").click()
    page.click("#revoke-tool")
    page.locator("#tools-note", has_text="add (demo) will be asked about before each call again").wait_for(
        timeout=30_000
    )
    assert json.loads((app.home / "tool-consent.json").read_text())["always"] == [["built-in", "calculator"]]

    # Kept across a restart, and the file stays owner-only with the token out of the page.
    app.stop()
    again = start_app(home=app.home)
    page = open_page(again)
    open_tools(page)
    page.locator("#tools-servers td", has_text="lighthouse_keeper").wait_for(timeout=60_000)
    rows = servers_table(page)
    assert rows["demo"][0] == "on" and rows["broken"][0] == "off"
    assert (app.home / "mcp-servers.json").stat().st_mode & 0o077 == 0
