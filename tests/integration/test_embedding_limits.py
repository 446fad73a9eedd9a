"""Embedding requests stop when their client leaves, only a few run at once, and stopping Hearth in the middle of
one is a clean exit: the real MiniLM behind a real server (in the test's process, and as `hearth ui`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backends.fake import FakeBackend
from tests.helpers import local_engines
from tests.integration.api_support import Served, free_port, serve_hearth

pytestmark = pytest.mark.integration

LONG_TEXT = " ".join(["The keeper trimmed the lamp wick and logged the passing ships before the storm."] * 12)
MODEL = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def hearth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_hearth(tmp_path_factory.mktemp("embed") / "home", make_engine=local_engines(FakeBackend)) as s:
        with s.client() as client:  # load MiniLM once, so the timings below are about the work itself
            assert client.post("/v1/embeddings", json={"model": MODEL, "input": "warm up"}).status_code == 200
        yield s


def big_request(count: int = 2048) -> dict[str, object]:
    return {"model": MODEL, "input": [f"{i} {LONG_TEXT}" for i in range(count)]}


def wait_for(condition: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_an_abandoned_request_stops_within_a_slice(hearth: Served) -> None:
    jobs = hearth.server.embeddings
    assert jobs is not None
    with hearth.client(timeout=2) as client, pytest.raises(httpx.TimeoutException):
        client.post("/v1/embeddings", json=big_request())  # the client gives up after 2 s and leaves
    assert wait_for(lambda: jobs.in_flight == 0, 15), "the embedding went on after its client had left"
    before = time.process_time()
    time.sleep(2)
    assert time.process_time() - before < 0.5  # and the CPU is quiet again


def _send_and_hold(served: Served, body: dict[str, object]) -> socket.socket:
    """An embedding request sent whole on a connection of its own, which the caller closes to leave: a client that
    can hang up whenever the test says, without waiting for the answer."""
    payload = json.dumps(body).encode()
    head = (
        "POST /v1/embeddings HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{served.server.port}\r\n"
        f"Authorization: Bearer {served.key}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    connection = socket.create_connection(("127.0.0.1", served.server.port), timeout=30)
    connection.sendall(head.encode() + payload)
    return connection


def test_past_two_at_once_a_request_is_told_to_come_back(hearth: Served) -> None:
    jobs = hearth.server.embeddings
    assert jobs is not None
    held = [_send_and_hold(hearth, big_request()) for _ in range(2)]
    try:
        assert wait_for(lambda: jobs.in_flight == 2, 30)
        with hearth.client() as client:
            third = client.post("/v1/embeddings", json={"model": MODEL, "input": "one more"})
        assert third.status_code == 429, third.text
        assert int(third.headers["retry-after"]) > 0 and third.json()["error"]["code"] == "busy"
    finally:
        for connection in held:  # the two clients leave: their embeddings stop within a slice
            connection.close()
    assert wait_for(lambda: jobs.in_flight == 0, 30)
    with hearth.client() as client:
        assert client.post("/v1/embeddings", json={"model": MODEL, "input": "again"}).status_code == 200


def test_sigterm_during_an_embedding_is_a_clean_exit(isolated_home: Path, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "ui.log"
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "ui", "--backend", "fake", "--port", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        assert wait_for(lambda: "Hearth is running at" in log.read_text() or process.poll() is not None, 120)
        key = (isolated_home / "api-key").read_text().strip()
        url = f"http://127.0.0.1:{port}/v1/embeddings"

        def embed() -> None:
            with contextlib.suppress(httpx.HTTPError):
                httpx.post(url, json=big_request(), headers={"Authorization": f"Bearer {key}"}, timeout=120)

        client = threading.Thread(target=embed, daemon=True)
        client.start()
        time.sleep(6)  # MiniLM loaded and slices being embedded
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    output = log.read_text()
    assert code == 128 + signal.SIGTERM, output[-3000:]
    for sign in ("Fatal Python error", "Aborted", "core dumped", "terminate called", "Traceback"):
        assert sign not in output, output[-3000:]
