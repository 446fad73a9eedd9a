"""The tools offered to the model for the page and the terminal: the built-in ones and those of the MCP servers
that are on, each under the name the model calls it by, and run when the user allowed it.

A tool's result is data for the model, never an instruction to Hearth: it goes back as the text of a tool turn,
cut at ``MAX_RESULT_BYTES`` with a note, and nothing in it can start or approve a call.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from app.tools.calculator import SPEC as CALCULATOR
from app.tools.calculator import CalculationError, calculate
from app.tools.mcp_link import ToolCallCancelled, ToolServerError, call_tool, keep_running_only, list_tools
from app.tools.servers import ServerEntry
from backends.base import CancelToken, ToolCall, ToolSpec
from backends.tool_calls import calls_grammar
from models.shared.errors import InvalidChoice

BUILT_IN = "built-in"
MAX_RESULT_BYTES = 32 * 1024


@dataclass(frozen=True)
class Offered:
    """One tool as the model sees it (``spec``, under its offered name) and where it runs."""

    spec: ToolSpec
    server: str  # BUILT_IN, or the MCP server's name
    tool: str  # its own name there
    run: Callable[[dict[str, object]], tuple[str, bool]]  # arguments -> (result text, is an error)


@dataclass(frozen=True)
class ToolBox:
    offered: tuple[Offered, ...]
    problems: tuple[str, ...] = ()  # servers that could not be listed, in words

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(o.spec for o in self.offered)

    def keeping(self, names: Collection[str]) -> ToolBox:
        """The box with only the tools named."""
        return dataclasses.replace(self, offered=tuple(o for o in self.offered if o.spec.name in names))

    def find(self, name: str) -> Offered | None:
        return next((o for o in self.offered if o.spec.name == name), None)

    def run(self, call: ToolCall) -> tuple[str, bool]:
        """The call's result for the model, or why it failed (as text too: the model reads it)."""
        tool = self.find(call.name)
        if tool is None:
            return f"There is no tool called {call.name!r}.", True
        try:
            arguments = json.loads(call.arguments or "{}")
        except (ValueError, RecursionError):
            return "The arguments were not valid JSON.", True
        if not isinstance(arguments, dict):
            return "The arguments must be a JSON object.", True
        text, failed = tool.run(arguments)
        return cut(text), failed


def cut(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= MAX_RESULT_BYTES:
        return text
    kept = data[:MAX_RESULT_BYTES].decode("utf-8", errors="ignore")
    return f"{kept}\n[Hearth cut this result at {MAX_RESULT_BYTES // 1024} KB of {len(data):,} bytes.]"


def built_in_tools() -> list[Offered]:
    def calculator(arguments: dict[str, object]) -> tuple[str, bool]:
        try:
            return calculate(str(arguments.get("expression", ""))), False
        except CalculationError as exc:
            return f"Cannot calculate: {exc}.", True

    return [Offered(CALCULATOR, BUILT_IN, CALCULATOR.name, calculator)]


def tools_box(
    entries: Sequence[ServerEntry],
    timeout_s: float,
    extra: Sequence[Offered] = (),
    calculator: bool = True,
    cancel: CancelToken | None = None,
) -> ToolBox:
    """The built-in tools (the calculator unless switched off), ``extra`` ones, and those of the servers that are
    on; a server that cannot be listed is left out and named in ``problems``. ``cancel`` (the answer's Stop) gives
    up a server's call that is under way."""
    offered, problems = server_tools(entries, timeout_s, cancel)
    built_in = built_in_tools() if calculator else []
    return ToolBox(tuple([*built_in, *extra, *offered]), tuple(problems))


def server_tools(
    entries: Sequence[ServerEntry], timeout_s: float, cancel: CancelToken | None = None
) -> tuple[list[Offered], list[str]]:
    """The tools of the servers that are on (each server started once to list them), and the ones that failed: a
    server that cannot be listed, or a tool whose parameters no grammar can hold (too large, or asking for more
    than a grammar may write), is left out and named, and the other tools are offered as usual."""
    offered: list[Offered] = []
    problems: list[str] = []
    keep_running_only(list(entries))
    for entry in entries:
        if not entry.enabled:
            continue
        try:
            listed = list_tools(entry, timeout_s)
        except ToolServerError as exc:
            problems.append(exc.message)
            continue
        for info in listed.tools:
            name = offered_name(entry.name, info.name)
            spec = ToolSpec(name, info.description[:2_000], info.parameters)
            unusable = why_unusable(spec)
            if unusable:
                problems.append(f"{entry.name}: its tool {info.name!r} is left out. {unusable}")
                continue
            offered.append(Offered(spec, entry.name, info.name, _runner(entry, info.name, timeout_s, cancel)))
    return offered, problems


@functools.lru_cache(maxsize=1024)
def why_unusable(spec: ToolSpec) -> str:
    """Why no grammar can hold a call to ``spec`` ("" when one can). Kept per tool: the page lists the servers'
    tools for every answer with tools on, and a server's tools rarely change between answers."""
    try:
        calls_grammar((spec,), None, required=True, parallel=False)
    except InvalidChoice as exc:
        return exc.message
    return ""


def offered_name(server: str, tool: str) -> str:
    """``server__tool`` in the characters function names may hold, at most 64."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{tool}")[:64]


def _runner(
    entry: ServerEntry, tool: str, timeout_s: float, cancel: CancelToken | None = None
) -> Callable[[dict[str, object]], tuple[str, bool]]:
    def run(arguments: dict[str, object]) -> tuple[str, bool]:
        try:
            result = call_tool(entry, tool, dict(arguments), timeout_s, cancel)
        except ToolCallCancelled as exc:
            return exc.message, True
        except ToolServerError as exc:
            return exc.message, True
        return result.text, result.is_error

    return run
