"""MCP servers that misbehave, for the tests: ``python -m tests.mcp.hostile_server MODE [PIDFILE]``.

``many`` lists 10,000 tools more (besides its six); ``greedy`` adds a tool whose parameters ask for a string of at
least a billion characters; ``banner`` prints lines of plain text on its output before it serves (a common mistake,
passed over); ``garbage`` answers every request with JSON that is not an MCP message; ``http-sse-PORT`` and
``http-json-PORT`` serve over Streamable HTTP on loopback (answers as server-sent events, or as JSON bodies). Every
other mode has the tools ``huge`` (a 100 MB result), ``big`` (a 1 MB one), ``environment`` (the names of the
variables it was started with), ``crash`` (the process ends mid-call), ``hang`` (never answers) and ``count`` (how
many times it was called in this process, and the process's id: state a kept session keeps). With PIDFILE, the
server writes its process id there first."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field


def garbage() -> None:
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if "id" in request:
            print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": "not an MCP result"}), flush=True)


def main() -> None:
    mode = sys.argv[1]
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(str(os.getpid()))
    if mode == "garbage":
        garbage()
        return
    server = MCPServer("hearth-hostile")

    def echo(x: int) -> int:
        return x

    if mode == "greedy":  # a tool whose parameter schema asks for a grammar of gigabytes

        def greedy(text: Annotated[str, Field(min_length=1_000_000_000)]) -> str:
            return text

        server.add_tool(greedy, name="greedy", description="Takes a very long text.")

    if mode == "many":
        for i in range(10_000):
            server.add_tool(echo, name=f"tool_{i:05}", description=f"Tool number {i}.")

    @server.tool()
    def huge() -> str:
        """A 100 MB result."""
        return "x" * 100_000_000

    @server.tool()
    def big() -> str:
        """A 1 MB result."""
        return "lamp " * 200_000

    @server.tool()
    def environment() -> str:
        """The names of the environment variables the server was started with."""
        return " ".join(sorted(os.environ))

    @server.tool()
    def crash() -> str:
        """Ends the process in the middle of the call."""
        os._exit(7)

    @server.tool()
    def hang() -> str:
        """Never answers."""
        time.sleep(3600)
        return "late"

    calls = [0]

    @server.tool()
    def count() -> str:
        """How many times this tool was called in this process, and the process's id."""
        calls[0] += 1
        return f"{calls[0]} {os.getpid()}"

    if mode == "banner":
        for n in range(3):
            print(f"hostile server v1 starting ({n})", flush=True)
    if mode.startswith("http-"):  # http-sse-PORT or http-json-PORT: over Streamable HTTP on loopback
        import uvicorn

        _, kind, port = mode.split("-")
        app = server.streamable_http_app(json_response=kind == "json")
        uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")
        return
    server.run()


if __name__ == "__main__":
    main()
