"""The Tools tab's pure parts (app/ui/tools_view.py): a server's words are escaped, the token never shown, the
form read as a command or an address, and the page's add refused from another machine."""

from __future__ import annotations

import pytest

from app.tools.mcp_link import ToolInfo
from app.tools.servers import http_entry, stdio_entry
from app.ui.page_request import from_this_computer
from app.ui.tools_view import ServerRow, allowed_choices, allowed_pair, entry_from_form, servers_html
from models.shared.errors import InvalidChoice


def test_a_servers_words_are_escaped_and_its_token_is_not_shown() -> None:
    tools = tuple(ToolInfo(f"t{i}", "", "{}") for i in range(14))
    hostile = ToolInfo("<img src=x onerror=alert(1)>", "", "{}")
    rows = [
        ServerRow(stdio_entry("notes", ["npx", "notes-mcp"]), (hostile, *tools), 400),
        ServerRow(http_entry("web", "https://mcp.example.org/mcp", "s3cret-token")),
        ServerRow(stdio_entry("bad", ["x"]), problem="It printed: <script>alert(1)</script>"),
    ]
    page = servers_html(rows, "10:00:00")
    assert "<img" not in page and "&lt;img src=x" in page and "<script>" not in page
    assert "s3cret-token" not in page and "(with a token)" in page
    assert "and 3 more (it lists 400; the first 15 are offered)" in page
    assert "not working" in page and "Asked at 10:00:00" in page
    assert "No MCP server is added" in servers_html([])


def test_the_form_reads_a_command_as_a_shell_would_split_it_or_an_address_with_its_token() -> None:
    entry = entry_from_form(" notes ", "npx -y '@scope/server files' ~/notes", "")
    assert (entry.name, entry.command, entry.args) == ("notes", "npx", ("-y", "@scope/server files", "~/notes"))
    web = entry_from_form("web", "https://mcp.example.org/mcp", " tok ")
    assert (web.kind, web.url, web.token) == ("http", "https://mcp.example.org/mcp", "tok")
    with pytest.raises(InvalidChoice, match="A token goes with an address"):
        entry_from_form("x", "npx server", "tok")
    with pytest.raises(InvalidChoice, match="Give the command"):
        entry_from_form("x", "  ", "")
    with pytest.raises(InvalidChoice, match="cannot be read"):
        entry_from_form("x", "npx 'unclosed", "")


def test_allowed_tools_round_trip_through_the_picker() -> None:
    choices = allowed_choices({("demo", "add"), ("built-in", "calculator")})
    assert [label for label, _ in choices] == ["calculator (built-in)", "add (demo)"]
    assert allowed_pair(choices[1][1]) == ("demo", "add")
    assert allowed_pair("not json") is None and allowed_pair('["one"]') is None


class _Client:
    def __init__(self, host: str) -> None:
        self.host = host


class _Request:
    def __init__(self, host: str) -> None:
        self.client = _Client(host)


def test_only_a_page_on_this_computer_may_add_a_server() -> None:
    assert from_this_computer(_Request("127.0.0.1")) and from_this_computer(_Request("::1"))  # type: ignore[arg-type]
    assert not from_this_computer(_Request("192.168.1.20"))  # type: ignore[arg-type]
    assert not from_this_computer(None)
