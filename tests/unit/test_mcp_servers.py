"""The MCP servers a user adds (app/tools/servers.py): names, what other apps' mcpServers files hold, the token
kept out of everything shown, and a damaged file reported and left as it is."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from app.tools.servers import ServerBook, http_entry, imported_entries, stdio_entry
from models.shared.errors import InvalidChoice, StorageError

CLAUDE_DESKTOP = {
    "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"]},
        "notes": {"command": "uvx", "args": ["notes-mcp"], "env": {"NOTES_DIR": "/home/me/notes"}, "disabled": True},
        "remote": {"url": "https://mcp.example.org/mcp", "headers": {"Authorization": "Bearer abc-123-token"}},
    }
}


def test_servers_from_another_apps_file_are_read_as_it_meant_them() -> None:
    files, notes, remote = imported_entries(json.dumps(CLAUDE_DESKTOP))
    assert (files.kind, files.command, files.args) == (
        "stdio",
        "npx",
        ("-y", "@modelcontextprotocol/server-filesystem", "/home/me"),
    )
    assert notes.env == (("NOTES_DIR", "/home/me/notes"),) and not notes.enabled
    assert (remote.kind, remote.url, remote.token) == ("http", "https://mcp.example.org/mcp", "abc-123-token")
    assert "abc-123-token" not in repr(remote) and "abc-123-token" not in remote.where
    assert remote.where == "https://mcp.example.org/mcp (with a token)"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "not JSON"),
        ("{}", "no mcpServers"),
        ('{"mcpServers": {"x": 5}}', "is not an object"),
        ('{"mcpServers": {"x": {"args": []}}}', "has no command"),
        ('{"mcpServers": {"bad name!": {"command": "x"}}}', "cannot name an MCP server"),
        ('{"mcpServers": {"x": {"url": "ftp://host/mcp"}}}', "not an http:// or https://"),
    ],
)
def test_a_file_hearth_cannot_use_is_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(InvalidChoice, match=says):
        imported_entries(text)


def test_the_book_keeps_servers_owner_only_and_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    book = ServerBook(tmp_path / "mcp-servers.json")
    assert book.entries() == []
    book.add(stdio_entry("demo", ["python", "-m", "demo"], {"A": "1"}))
    book.add(http_entry("web", "http://127.0.0.1:8000/mcp", "tok-en"))
    assert stat.S_IMODE((tmp_path / "mcp-servers.json").stat().st_mode) == 0o600
    with pytest.raises(InvalidChoice, match="already added"):
        book.add(stdio_entry("DEMO", ["other"]))
    assert not book.set_enabled("demo", False).enabled
    assert [(e.name, e.enabled) for e in ServerBook(tmp_path / "mcp-servers.json").entries()] == [
        ("demo", False),
        ("web", True),
    ]
    assert book.get("web").token == "tok-en"
    book.remove("web")
    with pytest.raises(InvalidChoice, match="no MCP server called 'web'"):
        book.get("web")
    with pytest.raises(InvalidChoice, match="needs the command"):
        stdio_entry("empty", [])


def test_a_damaged_file_is_reported_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "mcp-servers.json"
    path.write_text('{"servers": [{"kind": "stdio"}]}')
    with pytest.raises(StorageError, match="is damaged") as caught:
        ServerBook(path).entries()
    assert "hearth mcp add" in caught.value.remedy
    assert path.read_text() == '{"servers": [{"kind": "stdio"}]}'


def test_an_import_adds_every_server_or_none(tmp_path: Path) -> None:
    book = ServerBook(tmp_path / "mcp-servers.json")
    book.add(stdio_entry("notes", ["mine"]))
    before = (tmp_path / "mcp-servers.json").read_text()
    with pytest.raises(InvalidChoice, match="'notes' is already added; nothing was added"):
        book.add_all(imported_entries(json.dumps(CLAUDE_DESKTOP)))
    assert (tmp_path / "mcp-servers.json").read_text() == before
    with pytest.raises(InvalidChoice, match="given twice"):
        book.add_all([stdio_entry("Files", ["a"]), stdio_entry("files", ["b"])])
    book.remove("notes")
    book.add_all(imported_entries(json.dumps(CLAUDE_DESKTOP)))
    assert [e.name for e in book.entries()] == ["files", "notes", "remote"]


def test_only_the_separator_before_the_command_is_taken_off() -> None:
    from app.cli.mcp import _asked_entry

    entry = _asked_entry("runner", ["--", "npx", "-y", "tool", "--", "--verbose"], None, None, [])
    assert (entry.command, entry.args) == ("npx", ("-y", "tool", "--", "--verbose"))


@pytest.mark.parametrize(
    "url",
    [
        "https://me:s3cret-pass@mcp.example.org/mcp",
        "https://mcp.example.org/mcp?api_key=s3cret-pass",
        "http://127.0.0.1:8000/mcp#s3cret-pass",
    ],
)
def test_an_address_with_a_password_or_a_query_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(InvalidChoice) as refused:
        http_entry("web", url)
    assert "s3cret-pass" not in str(refused.value) and "--token-file" in refused.value.remedy
    with pytest.raises(InvalidChoice) as imported:
        imported_entries(json.dumps({"mcpServers": {"web": {"url": url}}}))
    assert "s3cret-pass" not in str(imported.value)
    kept = http_entry("web", url, stored=True)  # one kept before the rule is read, and shown without them
    assert "s3cret-pass" not in kept.where and kept.where.endswith("/mcp")


def test_a_file_nested_too_deep_is_said_to_be_not_json() -> None:
    with pytest.raises(InvalidChoice, match="not JSON that Hearth reads"):
        imported_entries('{"mcpServers": ' + "[" * 200_000 + "]" * 200_000 + "}")


def test_mcp_add_takes_its_options_before_the_command() -> None:
    from app.cli.main import parse_command_line
    from app.cli.parser import build_parser

    given = ["mcp", "add", "notes", "--env", "NOTES_DIR=/home/me/notes", "--", "uvx", "notes-mcp", "--verbose"]
    args = parse_command_line(build_parser(), given)
    assert (args.name, args.env, args.server_command) == (
        "notes",
        ["NOTES_DIR=/home/me/notes"],
        ["uvx", "notes-mcp", "--verbose"],
    )
    plain = parse_command_line(build_parser(), ["mcp", "add", "demo", "--", "python", "-m", "demo"])
    assert (plain.name, plain.env, plain.server_command) == ("demo", None, ["python", "-m", "demo"])
