"""The shared runtime seen from outside a real `hearth ui`: the engine SIGKILLed in the middle of an API stream
(the page and the API stay up, the stream ends with the reason, the next request works), and `hearth use`
switching the running Hearth from the command line while an API answer streams (the answer is not cut)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import psutil
import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.test_api_clients import hearth

pytestmark = pytest.mark.e2e

STORY = [{"role": "user", "content": "Write a very long story about a lighthouse keeper and a storm."}]


def engine_pid(app: RunningApp) -> int:
    for child in psutil.Process(app.process.pid).children(recursive=True):
        if "backends.engine" in " ".join(child.cmdline()):
            return int(child.pid)
    raise AssertionError("no engine process under hearth ui")


def ready(app: RunningApp, key: str) -> dict[str, Any]:
    """The runtime's status once a model is serving."""
    deadline = time.monotonic() + 120
    while True:
        status = httpx.get(f"{app.url}v1/hearth/status", headers=auth(key), timeout=10).json()
        if status["state"] == "ready":
            return dict(status)
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def api_key(app: RunningApp) -> str:
    printed = hearth(["api-key"], app.home, timeout=60)
    assert printed.returncode == 0, printed.stderr
    return printed.stdout.strip()


def stream(app: RunningApp, key: str, on_text: Callable[[str], None], max_tokens: int = 400) -> list[dict[str, Any]]:
    """One streamed chat completion; every SSE payload, in order."""
    body = {"model": "hearth", "messages": STORY, "max_tokens": max_tokens, "stream": True, "seed": 1}
    payloads: list[dict[str, Any]] = []
    with httpx.stream("POST", f"{app.url}v1/chat/completions", json=body, headers=auth(key), timeout=120) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            payload = json.loads(line.removeprefix("data: "))
            payloads.append(payload)
            for choice in payload.get("choices", []):
                if text := (choice.get("delta") or {}).get("content"):
                    on_text(text)
    return payloads


def test_killing_the_engine_mid_stream_leaves_the_page_and_api_up(start_app: Callable[..., RunningApp]) -> None:
    app = start_app()
    key = api_key(app)
    first = ready(app, key)
    victim = engine_pid(app)
    assert first["engine_pid"] == victim
    written: list[str] = []

    def on_text(text: str) -> None:
        written.append(text)
        if len(written) == 15:
            os.kill(victim, signal.SIGKILL)

    payloads = stream(app, key, on_text)
    errors = [p["error"] for p in payloads if "error" in p]
    assert len(errors) == 1 and "stopped unexpectedly" in errors[0]["message"] and "SIGKILL" in errors[0]["message"]
    assert len(written) >= 15
    assert httpx.get(app.url, cookies=app.cookies, timeout=10).status_code == 200  # the page is still served
    restarted = ready(app, key)
    assert restarted["engine_pid"] not in (None, victim)
    reply = httpx.post(
        f"{app.url}v1/chat/completions",
        json={"model": "hearth", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8},
        headers=auth(key),
        timeout=120,
    )
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]
    assert app.process.poll() is None


def test_the_cli_switches_the_running_hearth_after_the_answer_in_flight(start_app: Callable[..., RunningApp]) -> None:
    app = start_app()
    key = api_key(app)
    before = ready(app, key)
    assert before["context_length"] == 4096
    streaming = threading.Event()
    payloads: list[dict[str, Any]] = []

    def answer() -> None:
        payloads.extend(stream(app, key, lambda _text: streaming.set(), max_tokens=200))

    writer = threading.Thread(target=answer)
    writer.start()
    assert streaming.wait(60)
    switched = hearth(["use", "--context", "2048"], app.home, timeout=600)
    writer.join(120)
    assert switched.returncode == 0, switched.stderr
    assert "after the answers being written" in switched.stderr
    assert "context 2048 tokens" in switched.stdout
    finals = [c["finish_reason"] for p in payloads for c in p.get("choices", []) if c.get("finish_reason")]
    assert finals in (["length"], ["stop"])  # the answer ran to its end; nothing was cut
    assert not any("error" in p for p in payloads)
    after = ready(app, key)
    assert after["context_length"] == 2048 and after["engine_pid"] != before["engine_pid"]

    refused = hearth(["use", "--device", "npu"], app.home, timeout=120)
    assert refused.returncode == 1 and "Nothing was changed" in refused.stderr
    assert ready(app, key)["engine_pid"] == after["engine_pid"]  # the running model kept running


def test_stopping_hearth_stops_its_engine_and_forgets_where_it_ran(start_app: Callable[..., RunningApp]) -> None:
    app = start_app()
    ready(app, api_key(app))
    engine = engine_pid(app)
    assert (app.home / "server.json").exists()
    app.process.terminate()  # `kill PID`, as a service manager would
    deadline = time.monotonic() + 30
    while app.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # asked again while it shuts down (a closing window asks twice): the shutdown goes on
        with contextlib.suppress(ProcessLookupError):
            app.process.terminate()
    assert app.process.wait(timeout=30) != -signal.SIGTERM  # it shut down itself, not killed by the signal
    assert not (app.home / "server.json").exists()
    deadline = time.monotonic() + 15
    while psutil.pid_exists(engine) and psutil.Process(engine).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the engine outlived Hearth"
        time.sleep(0.1)
    unused = hearth(["use", "--context", "2048"], app.home, timeout=60)
    assert unused.returncode == 1 and "Hearth is not running" in unused.stderr
