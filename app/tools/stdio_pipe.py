"""Hearth's own stdio transport for MCP servers: the server's output is read a line at a time with a cap on a line's
size, so a server cannot make Hearth hold or parse an unbounded message, and what it writes that is not MCP is
reported at once instead of waited out.

The SDK's messages and their JSON form are the SDK's (``mcp.types``); only the reading, the limits and the
ending of the process are here. The server gets the SDK's short list of safe environment variables plus the ones
the user gave it, runs in a session of its own and is stopped (its whole process group) when the use ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from typing import IO, Any

# The largest message read from a server (a tools list or a result): a reply over it ends the use with a reason.
MAX_MESSAGE_BYTES = 16 << 20
# Lines of plain text (a server's banner printed to its output by mistake) passed over before it counts as broken.
MAX_STRAY_LINES = 20
READ_CHUNK = 1 << 16
STOP_WAIT_S = 2.0


class ServerMisbehaved(Exception):
    """The server wrote something Hearth will not read; ``str()`` is the reason, in words."""


def too_large(limit: int) -> ServerMisbehaved:
    return ServerMisbehaved(f"it sent a message larger than {limit >> 20} MB; Hearth reads at most {limit >> 20} MB")


def line_problem(line: bytes, strays: int) -> str | None:
    """Why ``line`` (one line of the server's output, not valid MCP) ends the use, or None to pass over it."""
    text = line.strip()
    if not text:
        return None
    shown = text[:80].decode("utf-8", errors="replace")
    if not text.startswith(b"{"):
        if strays < MAX_STRAY_LINES:
            return None
        return f"it wrote {MAX_STRAY_LINES} lines that are not MCP messages on its output, the last: {shown!r}"
    return f"it answered with something that is not an MCP message: {shown!r}"


class LineReader:
    """Splits the server's output into lines as it comes, in time linear in its length, refusing a line over
    ``limit`` bytes without waiting for its end."""

    def __init__(self, limit: int = MAX_MESSAGE_BYTES) -> None:
        self._buffer = bytearray()
        self._scanned = 0
        self._limit = limit

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        lines: list[bytes] = []
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end < 0:
                self._scanned = len(self._buffer)
                break
            lines.append(bytes(self._buffer[:end]))
            del self._buffer[: end + 1]
            self._scanned = 0
        if len(self._buffer) > self._limit:
            raise too_large(self._limit)
        return lines


@contextlib.asynccontextmanager
async def stdio_pipe(command: str, args: list[str], env: dict[str, str], errors: IO[str]) -> AsyncIterator[Any]:
    """Start the server and yield the (read, write) streams of MCP messages that the SDK's ``Client`` takes."""
    import anyio
    from mcp import types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    process = await anyio.open_process(
        [command, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        env=get_default_environment() | env,
        start_new_session=True,
    )
    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[Any](0)
    ending = False

    async def read_output() -> None:
        assert process.stdout is not None
        reader, strays = LineReader(), 0
        async with to_session:  # closed last: the session learns why before it sees the end
            while True:
                try:
                    data = await process.stdout.receive(READ_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                for line in reader.feed(data):
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except (ValidationError, ValueError):
                        problem = line_problem(line, strays)
                        if problem is not None:
                            raise ServerMisbehaved(problem) from None
                        strays += bool(line.strip())
                        continue
                    try:
                        await to_session.send(SessionMessage(message))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
            if not ending:  # the server ended on its own, in the middle of the use
                with anyio.move_on_after(STOP_WAIT_S):
                    await process.wait()
                code = process.returncode
                how = "" if code is None else f" (exit code {code})" if code >= 0 else f" ({_signal_name(-code)})"
                raise ServerMisbehaved(f"it stopped{how} before it answered")

    async def write_input() -> None:
        assert process.stdin is not None
        async with from_session:
            async for outgoing in from_session:
                data = outgoing.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await process.stdin.send(data.encode("utf-8"))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    return  # it stopped reading: the reader reports how it ended

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_output)
            tasks.start_soon(write_input)
            try:
                yield read_stream, write_stream
            finally:
                ending = True
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)


async def _stop(process: Any) -> None:
    """Close its input and give it a moment to end, then end its whole process group."""
    import anyio

    with contextlib.suppress(Exception):
        await process.stdin.aclose()
    with anyio.move_on_after(STOP_WAIT_S):
        await process.wait()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process.returncode is not None:
            break
        _signal_group(process.pid, sig)
        with anyio.move_on_after(STOP_WAIT_S):
            await process.wait()
    _signal_group(process.pid, signal.SIGKILL)  # what it started and left behind
    await process.aclose()


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, AttributeError):
        os.killpg(pid, sig)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
