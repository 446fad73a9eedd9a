"""What Hearth reads from a Chroma server, bounded: an answer larger than :data:`MAX_ANSWER_BYTES` is refused as it
arrives (a server could otherwise send gigabytes into memory), and a request with no whole answer within its
deadline is given up (a server could otherwise trickle a byte every few seconds, each within the read timeout,
and hold an ingest for hours). Both end the request as a transport failure, which the callers name as the server
not answering.

Chroma's client talks through one ``httpx.Client``; :func:`bound` wraps that client's transport (from the client's
first request on: ``rag.chroma_bounded_api``). The deadline is
kept by a timer that closes the transport's connections under a read still waiting (headers included), so no
thread waits past it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx

MAX_ANSWER_BYTES = 256 * 1024 * 1024
DEADLINE_S = 120.0
READ_TIMEOUT_S = 30.0  # for one read, connect or write; the deadline bounds the whole request


class AnswerCut(Exception):
    """Marks an answer cut by its bounds (the callers say so, not that the server is down)."""


class AnswerTooLarge(httpx.RemoteProtocolError, AnswerCut):
    pass


class AnswerTooLate(httpx.ReadTimeout, AnswerCut):
    pass


class BoundedTransport(httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport, max_bytes: int, deadline_s: float) -> None:
        self._inner = inner
        self._max_bytes = max_bytes
        self._deadline_s = deadline_s

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        overdue = threading.Event()

        def cut() -> None:
            overdue.set()
            self._inner.close()  # its connections: a read waiting on one ends at once

        timer = threading.Timer(self._deadline_s, cut)
        timer.daemon = True
        timer.start()
        try:
            response = self._inner.handle_request(request)
        except httpx.TransportError:
            timer.cancel()
            if overdue.is_set():
                raise self._late() from None
            raise
        except BaseException:
            timer.cancel()
            raise
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_bytes:
            timer.cancel()
            response.close()
            raise self._too_large(int(declared))
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _BoundedStream(response.stream, self, timer, overdue)
        return response

    def close(self) -> None:
        self._inner.close()

    def _late(self) -> AnswerTooLate:
        return AnswerTooLate(f"no whole answer within {self._deadline_s:.0f} s")

    def _too_large(self, size: int) -> AnswerTooLarge:
        return AnswerTooLarge(
            f"its answer of {size:,} bytes or more is over the {self._max_bytes // (1024 * 1024)} MB Hearth reads"
        )


class _BoundedStream(httpx.SyncByteStream):
    def __init__(
        self, inner: httpx.SyncByteStream, limits: BoundedTransport, timer: threading.Timer, overdue: threading.Event
    ) -> None:
        self._inner = inner
        self._limits = limits
        self._timer = timer
        self._overdue = overdue

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        try:
            for chunk in self._inner:
                read += len(chunk)
                if read > self._limits._max_bytes:
                    raise self._limits._too_large(read)
                yield chunk
        except httpx.TransportError:
            if self._overdue.is_set():
                raise self._limits._late() from None
            raise
        finally:
            self._timer.cancel()

    def close(self) -> None:
        self._timer.cancel()
        self._inner.close()


def bound(client: Any, max_bytes: int = MAX_ANSWER_BYTES, deadline_s: float = DEADLINE_S) -> None:
    """Bound every answer ``client`` (an ``httpx.Client``) reads from now on."""
    if isinstance(client, httpx.Client) and not isinstance(client._transport, BoundedTransport):
        client._transport = BoundedTransport(client._transport, max_bytes, deadline_s)


def bounded_get(url: str, deadline_s: float = DEADLINE_S, max_bytes: int = MAX_ANSWER_BYTES, **options: Any) -> Any:
    """``httpx.get`` with the same bounds (for the one request made before Chroma's client exists)."""
    with httpx.Client(**options) as client:
        bound(client, max_bytes, deadline_s)
        return client.get(url)
