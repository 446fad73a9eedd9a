"""Every route but uploads has a body limit, and connections that keep Hearth waiting are closed: a real server
(uvicorn with Hearth's protocol, the guard, Gradio) with the fake model, spoken to over raw sockets."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from backends.fake import FakeBackend
from tests.helpers import local_engines
from tests.integration.api_support import Served, serve_hearth

pytestmark = pytest.mark.integration

IDLE_S = 1.0


@pytest.fixture(scope="module")
def hearth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("limits") / "home"
    slow = local_engines(lambda: FakeBackend(token_delay_s=0.1))
    with serve_hearth(home, make_engine=slow, server={"idle_timeout_s": IDLE_S}) as served:
        yield served


def connect(hearth: Served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", hearth.server.port), timeout=30)


def head(hearth: Served, method: str, path: str, extra: str = "") -> bytes:
    cookie = "; ".join(f"{k}={v}" for k, v in hearth.page_cookies.items())
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{hearth.server.port}\r\nCookie: {cookie}\r\n"
        f"Content-Type: application/json\r\n{extra}\r\n"
    ).encode()


def status_of(sock: socket.socket) -> int:
    reply = b""
    while b"\r\n" not in reply:
        chunk = sock.recv(4096)
        if not chunk:
            break
        reply += chunk
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0


def test_a_declared_150_mb_body_to_the_queue_is_refused_before_it_is_sent(hearth: Served) -> None:
    with connect(hearth) as sock:
        sock.sendall(head(hearth, "POST", "/gradio_api/queue/join", f"Content-Length: {150 << 20}\r\n"))
        assert status_of(sock) == 413


def test_a_chunked_body_past_the_limit_is_refused_after_the_limit(hearth: Served) -> None:
    chunk = b"x" * (1 << 20)
    sent = 0
    with connect(hearth) as sock:
        sock.sendall(head(hearth, "POST", "/gradio_api/queue/join", "Transfer-Encoding: chunked\r\n"))
        try:
            for _ in range(150):
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed while we were still sending: what should happen
        assert status_of(sock) == 413
    assert sent < 100 << 20  # the server stopped reading long before the 150 MB were sent


def test_connections_that_send_nothing_or_stop_halfway_are_closed(hearth: Served) -> None:
    silent = [connect(hearth) for _ in range(100)]
    half_head = [connect(hearth) for _ in range(10)]
    for sock in half_head:
        sock.sendall(b"GET /config HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    half_body = [connect(hearth) for _ in range(10)]
    for sock in half_body:
        sock.sendall(head(hearth, "POST", "/gradio_api/queue/join", "Content-Length: 100\r\n") + b'{"data":')
    waiting = [*silent, *half_head, *half_body]
    deadline = time.monotonic() + IDLE_S + 20
    closed = 0
    for sock in waiting:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            while sock.recv(4096):  # a half-sent body may get an error reply first; then the close
                pass
            closed += 1
        except TimeoutError:
            pass
        finally:
            sock.close()
    assert closed == len(waiting)
    # The server still answers.
    with hearth.client() as client:
        assert client.get("/v1/models").status_code == 200


def test_a_long_answer_is_not_cut_while_the_client_only_reads(hearth: Served) -> None:
    words = " ".join(f"w{i}" for i in range(40))  # 0.1 s a word: about four times the idle limit
    body = {"model": "hearth", "messages": [{"role": "user", "content": words}], "stream": True, "max_tokens": 200}
    with hearth.client() as client, client.stream("POST", "/v1/chat/completions", json=body) as reply:
        text = "".join(reply.iter_text())
    assert reply.status_code == 200
    assert "w39" in text and "[DONE]" in text
