"""``hearth mcp add|list|remove|enable|disable|import``: the MCP servers whose tools the assistant may use."""

from __future__ import annotations

from pathlib import Path

from app.paths import ensure_data_dir, resolve_data_paths
from app.settings import Settings
from app.terminal_text import for_terminal
from app.tools.mcp_link import ToolServerError, list_tools
from app.tools.servers import ServerBook, ServerEntry, http_entry, imported_entries, read_token_file, stdio_entry
from models.shared.errors import InvalidChoice

EXIT_OK = 0


def run_mcp(
    settings: Settings,
    action: str,
    *,
    name: str | None = None,
    command: list[str] | None = None,
    url: str | None = None,
    token_file: Path | None = None,
    env: list[str] | None = None,
    file: Path | None = None,
) -> int:
    book = ServerBook(ensure_data_dir(resolve_data_paths(settings.home)).mcp_servers_file)
    timeout_s = settings.tools.call_timeout_s
    if action == "add":
        entry = _asked_entry(name or "", command or [], url, token_file, env or [])
        book.add(entry)
        print(f"Added the MCP server {entry.name} ({for_terminal(entry.where)}).")
        _show(entry, timeout_s)
        return EXIT_OK
    if action == "import":
        assert file is not None
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidChoice(
                f"{file} cannot be read ({exc}).", "Give the path of an mcpServers JSON file."
            ) from None
        entries = imported_entries(text)
        book.add_all(entries)
        print(
            f"Imported {len(entries)} MCP server{'s' if len(entries) != 1 else ''}: "
            f"{', '.join(e.name for e in entries)}. See them with hearth mcp list."
        )
        return EXIT_OK
    if action == "remove":
        gone = book.remove(name or "")
        print(f"Removed the MCP server {gone.name}; its tools are no longer offered.")
        return EXIT_OK
    if action in ("enable", "disable"):
        changed = book.set_enabled(name or "", action == "enable")
        state = "on: its tools are offered" if changed.enabled else "off: its tools are not offered"
        print(f"The MCP server {changed.name} is {state}.")
        return EXIT_OK
    entries = book.entries()
    if not entries:
        print("No MCP servers are added. Add one with hearth mcp add NAME -- COMMAND [ARG...] or --url URL.")
        return EXIT_OK
    for entry in entries:
        _show(entry, timeout_s)
    return EXIT_OK


def _asked_entry(
    name: str, command: list[str], url: str | None, token_file: Path | None, env: list[str]
) -> ServerEntry:
    if url is not None:
        if command:
            raise InvalidChoice("Give a command or --url, not both.", "hearth mcp add NAME --url URL")
        return http_entry(name, url, read_token_file(token_file) if token_file is not None else "")
    if token_file is not None:
        raise InvalidChoice("--token-file goes with --url.", "hearth mcp add NAME --url URL --token-file FILE")
    variables = {}
    for pair in env:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise InvalidChoice(f"--env {pair!r} is not KEY=VALUE.", "hearth mcp add NAME --env KEY=VALUE -- COMMAND")
        variables[key] = value
    return stdio_entry(name, command[1:] if command[:1] == ["--"] else command, variables)


def _show(entry: ServerEntry, timeout_s: float) -> None:
    head = f"{entry.name}\t{'on' if entry.enabled else 'off'}\t{for_terminal(entry.where)}"
    if not entry.enabled:
        print(f"{head}\t(switched off: hearth mcp enable {entry.name})")
        return
    try:
        listed = list_tools(entry, timeout_s)
    except ToolServerError as exc:
        print(f"{head}\tnot working: {for_terminal(exc.message)}")
        return
    more = (
        f" (it lists {listed.total}; the first {len(listed.tools)} are offered)"
        if listed.total > len(listed.tools)
        else ""
    )
    print(f"{head}\t{len(listed.tools)} tool{'s' if len(listed.tools) != 1 else ''}{more}")
    for tool in listed.tools:
        print(
            f"  {for_terminal(tool.name)}: {for_terminal(tool.description.splitlines()[0] if tool.description else '')}"
        )
