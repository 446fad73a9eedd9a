"""Pure functions for the Tools tab: the MCP servers as they answered just now, what the user typed to add one,
and the tools allowed for good. Everything a server says (its tools' names, descriptions, errors) is escaped: a
server's words are data, never markup."""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.tools.mcp_link import ToolInfo
from app.tools.servers import ServerEntry, http_entry, stdio_entry
from models.shared.errors import InvalidChoice

SHOWN_TOOLS = 12
NONE_ADDED = (
    "<p class='tools-none'>No MCP server is added. Add one below with the command that starts it (as its README "
    "gives it, such as <code>npx -y @modelcontextprotocol/server-filesystem ~/notes</code>) or its address.</p>"
)


@dataclass(frozen=True)
class ServerRow:
    entry: ServerEntry
    tools: tuple[ToolInfo, ...] = ()
    total: int = 0  # how many the server listed
    problem: str = ""  # why it could not be listed


def servers_html(rows: Sequence[ServerRow], as_of: str = "") -> str:
    """A table of the servers: name, on or off, where it runs (never its token), and its tools or its problem."""
    if not rows:
        return NONE_ADDED
    body = []
    for row in rows:
        entry = row.entry
        if not entry.enabled:
            state, tools = "<span class='tools-off'>off</span>", "not started while off"
        elif row.problem:
            state, tools = "<span class='tools-broken'>not working</span>", html.escape(row.problem)
        else:
            state, tools = "<span class='tools-on'>on</span>", _tools_cell(row)
        where = f"<code>{html.escape(entry.where)}</code>"
        cells = (f"<strong>{html.escape(entry.name)}</strong>", state, where, tools)
        body.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    head = "".join(f"<th>{name}</th>" for name in ("Server", "State", "Runs as", "Tools"))
    when = f"<p class='tools-as-of'>Asked at {html.escape(as_of)}.</p>" if as_of else ""
    return f"<table class='tools'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{when}"


def _tools_cell(row: ServerRow) -> str:
    if not row.tools:
        return "no tools"
    names = ", ".join(f"<code>{html.escape(t.name)}</code>" for t in row.tools[:SHOWN_TOOLS])
    more = len(row.tools) - SHOWN_TOOLS
    listed = f"{names} and {more} more" if more > 0 else names
    if row.total > len(row.tools):
        listed += f" (it lists {row.total}; the first {len(row.tools)} are offered)"
    return listed


def entry_from_form(name: str, target: str, token: str) -> ServerEntry:
    """The server the user described: ``target`` is the command that starts it (split as a shell would, nothing
    run by a shell) or its http(s) address; a token goes with an address only."""
    name, target, token = name.strip(), target.strip(), token.strip()
    if not target:
        raise InvalidChoice(
            "Give the command that starts the server, or its address.", "For example: npx -y some-mcp-server"
        )
    if target.startswith(("http://", "https://")):
        return http_entry(name, target, token)
    if token:
        raise InvalidChoice("A token goes with an address, not a command.", "Leave the token empty for a command.")
    try:
        parts = shlex.split(target)
    except ValueError as exc:
        raise InvalidChoice(f"The command cannot be read ({exc}).", "Check its quotes.") from None
    return stdio_entry(name, parts)


def allowed_choices(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(label, value) for each tool allowed for good; the value names the server and the tool without ambiguity."""
    return [(f"{tool} ({server})", json.dumps([server, tool])) for server, tool in sorted(pairs)]


def allowed_pair(value: str) -> tuple[str, str] | None:
    try:
        server, tool = json.loads(value)
    except (ValueError, TypeError):
        return None
    return (server, tool) if isinstance(server, str) and isinstance(tool, str) else None
