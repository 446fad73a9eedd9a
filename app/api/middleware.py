"""The guard in front of everything on the port, page and API alike (plain ASGI, so it also covers Gradio's
websocket and event-stream routes): Host and Origin first (``app.api.policy``), then for ``/v1`` the key and for
the page its secret (``app.api.page_gate``), then the body size cap on every route but uploads (which Gradio
caps per file). A refused request never reaches Gradio or the model."""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import BodyTooLarge, PageLocked, reply_for
from app.api.locked_page import locked_page_html
from app.api.page_gate import ENTRY_PATH, PageGate, offered_token, wants_page
from app.api.policy import AccessPolicy, check_host, check_key, check_origin, is_cross_origin_allowed, needs_key
from models.shared.errors import HearthError

# Far above any prompt a context window holds (a 32k-token prompt is ~130 kB); sized for batches of embeddings.
# The page's own requests (a question, a click) are far smaller; its uploads have their own limit.
MAX_BODY_BYTES = 4 << 20
UPLOAD_PATH = "/gradio_api/upload"
CORS_METHODS = "GET, POST, OPTIONS"
CORS_MAX_AGE_S = "600"


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        policy: AccessPolicy,
        key: Callable[[], str],
        max_body_bytes: int = MAX_BODY_BYTES,
        gate: PageGate | None = None,
    ) -> None:
        """``gate``: when given, every route outside ``/v1`` wants this start's page secret (``app.api.page_gate``)."""
        self._app = app
        self._policy = policy
        self._key = key
        self._max_body_bytes = max_body_bytes
        self._gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self._app(scope, receive, send)  # lifespan
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        try:
            check_host(self._policy, headers.get("host"))
            check_origin(self._policy, origin)
        except HearthError as exc:
            await _refuse(scope, receive, send, exc)
            return
        if not needs_key(scope["path"]):
            if self._gate is not None and not await self._admitted(self._gate, scope, receive, send, headers):
                return
            if scope["type"] == "websocket" or scope["path"] == UPLOAD_PATH:  # uploads: Gradio caps each file
                await self._app(scope, receive, send)
                return
            try:
                body = await self._read_body(headers, receive)
            except HearthError as exc:
                await _refuse(scope, receive, send, exc)
                return
            if body is not None:
                await self._app(scope, _replay(body, receive), send)
            return
        if scope["type"] == "websocket":
            await self._app(scope, receive, send)
            return
        cors = is_cross_origin_allowed(self._policy, origin)
        if cors and scope["method"] == "OPTIONS":
            await _preflight(send, origin or "", headers.get("access-control-request-headers"))
            return
        send = _with_cors(send, origin or "") if cors else send
        try:
            check_key(headers.get("authorization"), self._key())
            body = await self._read_body(headers, receive)
        except HearthError as exc:
            await _refuse(scope, receive, send, exc)
            return
        if body is None:
            return  # the client left while sending
        await self._app(scope, _replay(body, receive), send)

    async def _admitted(self, gate: PageGate, scope: Scope, receive: Receive, send: Send, headers: Headers) -> bool:
        """Whether the request carries the page secret; if not, it has been answered here (the exchange of the
        secret for the cookie, the "how to get in" page, or a refusal)."""
        if gate.admits(headers.get("cookie")):
            return True
        if scope["type"] == "http":
            offered = offered_token(scope["path"], scope.get("query_string", b""))
            if offered is not None and scope["method"] in ("GET", "HEAD"):
                if gate.matches(offered):
                    await _enter(send, gate)
                    return False
                await _locked_page(send, stale=True)
                return False
            if wants_page(scope["method"], scope["path"], headers.get("accept")):
                await _locked_page(send, stale=False)
                return False
        await _refuse(scope, receive, send, _page_locked())
        return False

    async def _read_body(self, headers: Headers, receive: Receive) -> bytes | None:
        """The whole body, refused as soon as it is known to be over the cap (from Content-Length, or while it
        arrives in chunks), so an oversized request is never held in memory."""
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max_body_bytes:
            raise _too_large(self._max_body_bytes)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max_body_bytes:
                raise _too_large(self._max_body_bytes)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"The request body is larger than {limit >> 20} MiB.",
        "Send less text per request (a prompt must fit the model's context window anyway).",
    )


def _page_locked() -> PageLocked:
    return PageLocked(
        "This Hearth answers only the person who started it, and this request does not carry its page secret.",
        "Open the address that `hearth ui` printed in its terminal (it ends in ?token=…), or start it with "
        "`hearth ui --open`.",
    )


async def _enter(send: Send, gate: PageGate) -> None:
    """The secret was right: the cookie, and the page without the secret in its address."""
    headers = [
        (b"location", ENTRY_PATH.encode()),
        (b"set-cookie", gate.set_cookie().encode()),
        (b"cache-control", b"no-store"),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _locked_page(send: Send, stale: bool) -> None:
    body = locked_page_html(stale).encode()
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the body already read, then passes on what follows (the disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _refuse(scope: Scope, receive: Receive, send: Send, exc: HearthError) -> None:
    if scope["type"] == "websocket":
        await receive()  # websocket.connect; closing before accepting answers the handshake with 403
        await send({"type": "websocket.close", "code": 1008, "reason": exc.message[:100]})
        return
    reply = reply_for(exc)
    body = json.dumps(reply.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in reply.headers().items()]
    if isinstance(exc, BodyTooLarge):
        headers.append((b"connection", b"close"))  # the rest of the body is not read: the connection goes
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _preflight(send: Send, origin: str, requested_headers: str | None) -> None:
    headers = [
        (b"access-control-allow-origin", origin.encode()),
        (b"access-control-allow-methods", CORS_METHODS.encode()),
        # A listed origin is trusted; its client library may add headers of its own (openai-node does).
        (b"access-control-allow-headers", (requested_headers or "authorization, content-type").encode()),
        (b"access-control-max-age", CORS_MAX_AGE_S.encode()),
        (b"vary", b"Origin"),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _with_cors(send: Send, origin: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message.setdefault("headers", [])
            headers = MutableHeaders(scope=message)
            headers["access-control-allow-origin"] = origin
            headers["access-control-expose-headers"] = "Retry-After"
            headers.append("vary", "Origin")
        await send(message)

    return sending
