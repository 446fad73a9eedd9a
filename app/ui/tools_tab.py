"""The Tools tab: the MCP servers whose tools the assistant may use (add, switch off or on, remove, see their
tools or why they fail) and the tools allowed for good, each of which can be asked about again. Wiring only; the
table and the form's reading are ``app.ui.tools_view``'s.

Adding a server runs a command as the user (or reaches an address from this computer), so only a page opened on
this computer may add one: a page reached from another machine (served beyond loopback, with the key) may list,
switch and remove servers but not add them.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from app.tools.consent import ConsentBook
from app.tools.mcp_link import ToolServerError, keep_running_only, list_tools
from app.tools.servers import ServerBook
from app.ui.page_request import from_this_computer
from app.ui.tools_view import ServerRow, allowed_choices, allowed_pair, entry_from_form, servers_html
from models.shared.errors import HearthError

ONLY_HERE = (
    "Servers can be added only from a page opened on this computer: a server runs a command as you. Add it there, "
    "or with hearth mcp add in a terminal."
)


@dataclass
class ToolsUi:
    table: Any
    name: Any
    target: Any
    token: Any
    add: Any
    chosen: Any
    switch: Any
    remove: Any
    allowed: Any
    revoke: Any
    note: Any


def build_tools_tab() -> tuple[Any, ToolsUi]:
    with gr.Tab("Tools", id="tools-tab", elem_id="tools-tab") as tab:
        gr.Markdown(
            "Tools let the assistant look things up and act: the built-in calculator, and the tools of the "
            "MCP (Model Context Protocol) servers you add here. Turn them on above the chat (**Tools: the model "
            "decides**): each call is shown and waits for you to allow or deny it. A server runs as you, with your "
            "files: add only servers you trust.",
            elem_id="tools-intro",
        )
        table = gr.HTML("", elem_id="tools-servers")
        with gr.Row(equal_height=True):
            name = gr.Textbox(label="Name", placeholder="notes", elem_id="tool-server-name", scale=1, max_length=40)
            target = gr.Textbox(
                label="Command that starts it, or its address",
                placeholder="npx -y @modelcontextprotocol/server-filesystem ~/notes   or   https://host/mcp",
                elem_id="tool-server-target",
                scale=3,
            )
            token = gr.Textbox(
                label="Token (for an address)", type="password", elem_id="tool-server-token", scale=1, max_length=4096
            )
            add = gr.Button("Add", elem_id="add-tool-server", scale=0, min_width=100)
        with gr.Row(equal_height=True):
            chosen = gr.Dropdown(choices=[], label="Server", elem_id="tool-server-chosen", scale=2)
            switch = gr.Button("Switch off or on", size="sm", elem_id="switch-tool-server", scale=0, min_width=160)
            remove = gr.Button("Remove", size="sm", elem_id="remove-tool-server", scale=0, min_width=110)
        with gr.Row(equal_height=True):
            allowed = gr.Dropdown(
                choices=[], label="Allowed without asking", elem_id="tools-allowed", scale=2, interactive=True
            )
            revoke = gr.Button("Ask again each time", size="sm", elem_id="revoke-tool", scale=0, min_width=180)
        note = gr.Markdown("", elem_id="tools-note")
    return tab, ToolsUi(table, name, target, token, add, chosen, switch, remove, allowed, revoke, note)


class ToolsPanel:
    def __init__(self, servers_file: Path, consent_file: Path, timeout_s: float) -> None:
        self._book = ServerBook(servers_file)
        self._consent = ConsentBook(consent_file)
        self._timeout_s = timeout_s

    def listing(self) -> tuple[str, Any, Any]:
        """The table (each server that is on started to list its tools), the server picker, the allowed picker."""
        try:
            entries = self._book.entries()
        except HearthError as exc:
            return f"<p class='tools-broken'>{html.escape(exc.for_page)}</p>", gr.update(choices=[]), self._allowed()
        keep_running_only(entries)  # one removed or switched off is ended now
        rows = []
        for entry in entries:
            if not entry.enabled:
                rows.append(ServerRow(entry))
                continue
            try:
                listed = list_tools(entry, self._timeout_s)
            except ToolServerError as exc:
                rows.append(ServerRow(entry, problem=exc.reason or exc.message))
                continue
            rows.append(ServerRow(entry, listed.tools, listed.total))
        names = [e.name for e in entries]
        picker = gr.update(choices=names, value=names[0] if names else None)
        return servers_html(rows, time.strftime("%H:%M:%S")), picker, self._allowed()

    def add(self, name: str, target: str, token: str, request: gr.Request) -> tuple[Any, ...]:
        """Add the server described; the token box is emptied either way."""
        if not from_this_computer(request):
            return ONLY_HERE, *self.listing(), gr.update(), gr.update(), ""
        try:
            entry = self._book.add(entry_from_form(name, target, token))
        except HearthError as exc:
            return f"Not added: {exc.for_page}", *self.listing(), gr.update(), gr.update(), ""
        note = f"Added **{entry.name}**. Its tools are offered when tools are on in the chat, each call asked about."
        return note, *self.listing(), "", "", ""

    def switch(self, name: str | None) -> tuple[Any, ...]:
        if not name:
            return "Pick a server first.", *self.listing()
        try:
            entry = self._book.get(name)
            changed = self._book.set_enabled(name, not entry.enabled)
        except HearthError as exc:
            return f"Not changed: {exc.message}", *self.listing()
        state = "on: its tools are offered" if changed.enabled else "off: its tools are not offered"
        return f"**{changed.name}** is {state}.", *self.listing()

    def remove(self, name: str | None) -> tuple[Any, ...]:
        if not name:
            return "Pick a server first.", *self.listing()
        try:
            gone = self._book.remove(name)
        except HearthError as exc:
            return f"Not removed: {exc.message}", *self.listing()
        return f"Removed **{gone.name}**; its tools are no longer offered.", *self.listing()

    def revoke(self, value: str | None) -> tuple[Any, Any]:
        pair = allowed_pair(value or "")
        if pair is None:
            return "Pick a tool allowed without asking first.", self._allowed()
        try:
            self._consent.revoke(*pair)
        except HearthError as exc:
            return f"Not changed: {exc.message}", self._allowed()
        return f"**{pair[1]}** ({pair[0]}) will be asked about before each call again.", self._allowed()

    def _allowed(self) -> Any:
        choices = allowed_choices(self._consent.allowed())
        return gr.update(choices=choices, value=choices[0][1] if choices else None)


def wire_tools_tab(panel: ToolsPanel, ui: ToolsUi, tab: Any) -> None:
    listing = [ui.table, ui.chosen, ui.allowed]
    tab.select(panel.listing, outputs=listing, concurrency_id="tools")
    for trigger in (ui.add.click, ui.target.submit):
        trigger(
            panel.add,
            [ui.name, ui.target, ui.token],
            [ui.note, *listing, ui.name, ui.target, ui.token],
            concurrency_id="tools",
        )
    ui.switch.click(panel.switch, [ui.chosen], [ui.note, *listing], concurrency_id="tools")
    ui.remove.click(panel.remove, [ui.chosen], [ui.note, *listing], concurrency_id="tools")
    ui.revoke.click(panel.revoke, [ui.allowed], [ui.note, ui.allowed], concurrency_id="tools")
