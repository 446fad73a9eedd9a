"""A cap on what an MCP server reached over HTTP may send: each response body is counted as it arrives and the
use ends, with the reason, once it passes :data:`app.tools.stdio_pipe.MAX_MESSAGE_BYTES`; a server cannot make
Hearth hold an unbounded reply. Server-sent events get the same limit per event from the SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.tools.stdio_pipe import MAX_MESSAGE_BYTES, too_large


def capped_transport(limit: int = MAX_MESSAGE_BYTES) -> Any:
    """An ``httpx2`` transport whose response bodies end with :class:`ServerMisbehaved` past ``limit`` bytes."""
    import httpx2

    class CappedBody(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self._inner:
                seen += len(chunk)
                if seen > limit:
                    raise too_large(limit)
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            response = await self._inner.handle_async_request(request)
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                await response.aclose()
                raise too_large(limit)
            response.stream = CappedBody(response.stream)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedTransport()
