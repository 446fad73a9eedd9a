"""The guard in front of the port, around a stand-in app: what reaches the app and what is refused first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket, WebSocketDisconnect

from app.api.middleware import Guard
from app.api.page_headers import CONTENT_SECURITY_POLICY, CSP_DIRECTIVES, SecurityHeaders
from app.api.policy import access_policy

KEY = "hearth-test-key-0123456789abcdef"
ORIGIN = "http://127.0.0.1:7860"
LISTED = "http://localhost:3000"
SOCKET = "ws://127.0.0.1:7860/ws"  # a full URL: the test client names its own host for a bare path


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"bytes": len(await request.body())})


async def socket(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text("hello")
    await websocket.close()


@pytest.fixture
def client() -> Iterator[TestClient]:
    app = Starlette(routes=[Route("/v1/echo", echo, methods=["POST"]), WebSocketRoute("/ws", socket)])
    guard = Guard(app, access_policy("127.0.0.1", 7860, allowed_origins=[LISTED]), lambda: KEY, max_body_bytes=1000)
    with TestClient(guard, base_url=ORIGIN) as test_client:
        yield test_client


AUTH = {"Authorization": f"Bearer {KEY}"}


def test_a_body_under_the_cap_reaches_the_app_whole(client: TestClient) -> None:
    assert client.post("/v1/echo", content=b"x" * 1000, headers=AUTH).json() == {"bytes": 1000}
    chunked = client.post("/v1/echo", content=iter([b"x" * 400, b"y" * 400]), headers=AUTH)
    assert chunked.json() == {"bytes": 800}


def test_a_body_over_the_cap_is_refused_declared_or_chunked(client: TestClient) -> None:
    declared = client.post("/v1/echo", content=b"x" * 1001, headers=AUTH)
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "request_too_large"
    chunked = client.post("/v1/echo", content=iter([b"x" * 600, b"y" * 600]), headers=AUTH)
    assert chunked.status_code == 413


def test_the_key_is_checked_before_the_body(client: TestClient) -> None:
    assert client.post("/v1/echo", content=b"x" * 5000).status_code == 401


def test_websockets_from_a_foreign_origin_or_host_are_refused(client: TestClient) -> None:
    with client.websocket_connect(SOCKET, headers={"Origin": ORIGIN}) as ws:
        assert ws.receive_text() == "hello"
    for headers in ({"Origin": "http://evil.example"}, {"Host": "evil.example:7860"}):
        with pytest.raises(WebSocketDisconnect) as caught, client.websocket_connect(SOCKET, headers=headers):
            pass
        assert caught.value.code == 1008


def test_a_listed_origin_gets_cors_headers_and_a_preflight(client: TestClient) -> None:
    preflight = client.options("/v1/echo", headers={"Origin": LISTED, "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == LISTED
    assert "authorization" in preflight.headers["access-control-allow-headers"]
    reply = client.post("/v1/echo", content=b"{}", headers={**AUTH, "Origin": LISTED})
    assert reply.headers["access-control-allow-origin"] == LISTED
    refused = client.post("/v1/echo", content=b"x" * 5000, headers={**AUTH, "Origin": LISTED})
    assert refused.status_code == 413 and refused.headers["access-control-allow-origin"] == LISTED
    same_origin = client.post("/v1/echo", content=b"{}", headers={**AUTH, "Origin": ORIGIN})
    assert "access-control-allow-origin" not in same_origin.headers


def test_every_response_carries_the_security_headers_refusals_too() -> None:
    app = Starlette(routes=[Route("/v1/echo", echo, methods=["POST"])])
    guarded = SecurityHeaders(Guard(app, access_policy("127.0.0.1", 7860), lambda: KEY))
    with TestClient(guarded, base_url=ORIGIN) as client:
        replies = [
            client.post("/v1/echo", content=b"{}", headers=AUTH),
            client.post("/v1/echo", content=b"{}", headers={**AUTH, "Origin": "http://evil.example"}),
            client.get("/nowhere"),
        ]
    assert [reply.status_code for reply in replies] == [200, 403, 404]
    for reply in replies:
        assert reply.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["referrer-policy"] == "no-referrer"


def test_the_policy_names_no_other_origin() -> None:
    directives = dict(CSP_DIRECTIVES)
    sources = {source for value in directives.values() for source in value.split()}
    # Keywords and schemes made inside the page only: no host, no wildcard, no http:, https: or ws: scheme.
    assert sources <= {"'self'", "'none'", "'unsafe-inline'", "'unsafe-eval'", "data:"}
    assert directives["default-src"] == "'self'"
    for name in ("object-src", "base-uri", "form-action", "frame-ancestors"):
        assert name in directives  # these do not fall back to default-src
    assert directives["connect-src" if "connect-src" in directives else "default-src"] == "'self'"
