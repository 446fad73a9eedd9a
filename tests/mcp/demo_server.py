"""A real MCP server written with the official SDK, for the tests: ``python -m tests.mcp.demo_server [--http PORT
[--token TOKEN]]``. Over stdio by default; over Streamable HTTP on 127.0.0.1 with ``--http`` (and, with
``--token``, only for requests that carry it as a bearer token)."""

from __future__ import annotations

import argparse
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("hearth-demo")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def lighthouse_keeper(name: str) -> str:
    """Who keeps the named lighthouse."""
    return {"skerry": "Alan Brody"}.get(name.casefold(), "unknown")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--token", default=None)
    args = parser.parse_args()
    print("hearth-demo MCP server starting", file=sys.stderr, flush=True)
    if args.http is None:
        server.run()
        return
    import uvicorn

    app = server.streamable_http_app()
    if args.token is not None:
        app = _bearer_only(app, args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")


def _bearer_only(app, token: str):  # type: ignore[no-untyped-def]
    async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"token required"})
                return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    main()
