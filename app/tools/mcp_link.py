"""Talking to one MCP server with the official SDK (``mcp``): list its tools, call one. The server is started
(stdio) or its session opened (Streamable HTTP) at the first use and kept for the next ones
(:mod:`app.tools.server_pool`); each use has a time limit, and a use that fails ends the session.

What can go wrong is reported as :class:`ToolServerError`, with the last line a stdio server printed on its error
stream (captured in an unnamed, owner-only temporary file) and never the server's token. A stdio server is
started with the SDK's short list of safe environment variables (PATH, HOME, USER, …) plus the ones the user gave
it: none of Hearth's own settings or secrets (HEARTH_*, the API key) reach it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import IO, Any, TypeVar

from app.tools.http_cap import capped_transport
from app.tools.server_pool import SessionEnded, SessionFailed, UseCancelled, UseTimedOut, shared_pool
from app.tools.servers import ServerEntry
from app.tools.stdio_pipe import MAX_MESSAGE_BYTES, ServerMisbehaved, stdio_pipe
from backends.base import CancelToken
from models.shared.errors import HearthError

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

# A server may list any number of tools; this many are read, and offered to the model at most.
MAX_LISTED_TOOLS = 128


class ToolServerError(HearthError):
    """An MCP server could not be started, reached or used; ``reason`` says why without naming the server."""

    reason: str = ""


class ToolCallCancelled(HearthError):
    """Stop came while a call waited for its server: the call was given up (and the server's session ended)."""


@dataclass(frozen=True)
class ToolInfo:
    name: str
    description: str
    parameters: str  # the input JSON Schema, as text


@dataclass(frozen=True)
class ListedTools:
    tools: tuple[ToolInfo, ...]
    total: int  # how many the server listed (more than ``tools`` holds when it listed over MAX_LISTED_TOOLS)


def list_tools(entry: ServerEntry, timeout_s: float) -> ListedTools:
    async def listing(client: Any) -> ListedTools:
        result = await client.list_tools()
        tools = tuple(
            ToolInfo(t.name, t.description or "", _schema_text(t.input_schema or {"type": "object"}))
            for t in result.tools[:MAX_LISTED_TOOLS]
        )
        return ListedTools(tools, len(result.tools))

    return _with_server(entry, timeout_s, listing)


def _schema_text(schema: object) -> str:
    """A tool's input schema as JSON text; empty (which no grammar reads, so the tool is left out and named) when
    it cannot be written, as when it nests thousands deep."""
    try:
        return json.dumps(schema)
    except (TypeError, ValueError, RecursionError):
        return ""


def _with_server(
    entry: ServerEntry, timeout_s: float, use: Callable[[Any], Awaitable[T]], cancel: CancelToken | None = None
) -> T:
    """``use(client)`` on the server's running session (:mod:`app.tools.server_pool`: started at its first use,
    kept for the next ones, started again after a failure)."""
    try:
        result: T = shared_pool(_client).use(entry, timeout_s, use, cancel)
        return result
    except UseCancelled:
        raise ToolCallCancelled("The call was stopped before the server answered.", "") from None
    except SessionFailed as failed:
        cause = failed.cause
        if isinstance(cause, HearthError):
            raise cause from None
        if isinstance(cause, UseTimedOut):
            raise _failed(entry, f"it did not answer within {timeout_s:g} s", failed.printed) from None
        # the SDK raises many kinds (and groups of them) for a server that fails
        raise _failed(entry, _reason(cause), failed.printed) from None


def keep_running_only(entries: list[ServerEntry]) -> None:
    """The servers kept running are those of ``entries`` that are on: any other one (removed, switched off, or
    changed since it started) is ended now."""
    shared_pool(_client).keep_only(entries)


def _client(entry: ServerEntry, timeout_s: float, errors: IO[str]) -> Any:
    from mcp import Client

    if entry.kind == "stdio":
        pipe = stdio_pipe(entry.command, list(entry.args), dict(entry.env), errors)
        return Client(pipe, read_timeout_seconds=timeout_s)
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {entry.token}"} if entry.token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(timeout_s), transport=capped_transport())
    transport = streamable_http_client(entry.url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES)
    return Client(transport, read_timeout_seconds=timeout_s)


def _reason(exc: BaseException) -> str:
    """The innermost, most telling cause of an SDK failure, in one line."""
    misbehaved = _found(exc, ServerMisbehaved)
    if misbehaved is not None:  # what the server did, rather than what the session made of it
        return str(misbehaved)
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"its command was not found ({exc.filename or exc})"
    if isinstance(exc, SessionEnded):
        return str(exc)
    text = " ".join(str(exc).split()) or type(exc).__name__
    if type(exc).__name__ == "ConnectError":
        return "nothing answers at that address (is the server running?)"
    if "Connection closed" in text:
        return "it closed the connection before answering (it stopped, or never started as an MCP server)"
    return f"{type(exc).__name__}: {text}"[:300]


def _found(exc: BaseException, kind: type[E], depth: int = 0) -> E | None:
    """The first exception of ``kind`` in ``exc``, its groups or what caused it (a few levels down)."""
    if isinstance(exc, kind):
        return exc
    if depth > 8:
        return None
    inner = list(exc.exceptions) if isinstance(exc, BaseExceptionGroup) else []
    cause = exc.__cause__ or exc.__context__
    for each in [*inner, *([cause] if cause is not None else [])]:
        found = _found(each, kind, depth + 1)
        if found is not None:
            return found
    return None


def _failed(entry: ServerEntry, reason: str, printed: str) -> ToolServerError:
    lines = [line.strip() for line in printed.splitlines() if line.strip()]
    said = f" It printed: {_without_token(lines[-1][:300], entry)}" if lines else ""
    why = f"{_without_token(reason, entry)}.{said}"
    message = f"The MCP server {entry.name!r} ({entry.where}) could not be used: {why}"
    if entry.kind == "http":
        remedy = f"Check the address and the token; to change them, hearth mcp remove {entry.name} and add it again."
        page_remedy = "Check the address and the token; to change them, remove it in the Tools tab and add it again."
    else:
        remedy = "Check that the command starts the server when run on its own, then see hearth mcp list."
        page_remedy = "Check that the command starts the server when run on its own in a terminal."
    failure = ToolServerError(message, remedy, page_remedy)
    failure.reason = why[0].upper() + why[1:]
    return failure


def _without_token(text: str, entry: ServerEntry) -> str:
    return text.replace(entry.token, "[token]") if entry.token else text


@dataclass(frozen=True)
class CallResult:
    text: str
    is_error: bool


def call_tool(
    entry: ServerEntry, name: str, arguments: dict[str, Any], timeout_s: float, cancel: CancelToken | None = None
) -> CallResult:
    """Run one tool of the server; its text content joined (other content named, not read). ``cancel`` gives the
    call up (:class:`ToolCallCancelled`)."""

    async def calling(client: Any) -> CallResult:
        result = await client.call_tool(name, arguments)
        parts = []
        for block in result.content or []:
            text = getattr(block, "text", None)
            parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')} left out]")
        if not parts and result.structured_content is not None:
            parts.append(json.dumps(result.structured_content, ensure_ascii=False))
        return CallResult("\n".join(parts), bool(result.is_error))

    return _with_server(entry, timeout_s, calling, cancel)
