"""`hearth worker` serves llama.cpp's RPC for real: two workers on loopback hold the embedded model's layers for a
llama.cpp client that added them (through ``backends.rpc``), and greedy decoding gives the text a single process
gives. The worker refuses to serve beyond loopback, and a port in use gets a clear message."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port

pytestmark = pytest.mark.integration

GENERATE = """
import sys
from backends import llamacpp_buffers
from backends.rpc import attach_workers, parse_endpoint
import llama_cpp

workers = tuple(parse_endpoint(e) for e in sys.argv[2:])
if workers:
    attach_workers(workers)
with llamacpp_buffers.for_llama_class():
    llm = llama_cpp.Llama(
        sys.argv[1], n_ctx=256, n_threads=1, verbose=False, seed=0,
        n_gpu_layers=-1 if workers else 0, tensor_split=[1.0] * len(workers) if workers else None,
    )
out = llm("The three primary colours are", max_tokens=24, temperature=0.0)
print("TEXT:" + out["choices"][0]["text"].replace("\\n", "\\\\n"))
"""


def _generate(model: Path, *workers: str) -> str:
    ran = subprocess.run(
        [sys.executable, "-c", GENERATE, str(model), *workers],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return next(line for line in ran.stdout.splitlines() if line.startswith("TEXT:"))


def _start_worker(home: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app", "worker", "--port", str(port), "--threads", "1"],
        env={**os.environ, "HEARTH_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def workers(isolated_home: Path) -> Iterator[list[str]]:
    started = []
    endpoints = []
    for _ in range(2):
        port = free_port()
        started.append(_start_worker(isolated_home, port))
        endpoints.append(f"127.0.0.1:{port}")
    try:
        for process, endpoint in zip(started, endpoints, strict=True):
            line = process.stdout.readline() if process.stdout else ""
            assert f"serving this machine's CPU (1 thread) on {endpoint}" in line, line
        yield endpoints
    finally:
        for process in started:
            process.terminate()
            process.wait(timeout=15)


def test_two_workers_hold_the_layers_and_the_text_is_the_single_process_text(
    workers: list[str], embedded_model: Path, isolated_home: Path
) -> None:
    alone = _generate(embedded_model)
    split = _generate(embedded_model, *workers)
    assert split == alone
    assert len(alone) > len("TEXT:") + 10
    cache = isolated_home / "cache" / "worker-tensors"
    assert any(cache.iterdir())  # the workers kept what they were sent, for the next load


def test_stopping_a_worker_stops_its_server(isolated_home: Path) -> None:
    port = free_port()
    worker = _start_worker(isolated_home, port)
    assert worker.stdout is not None and "serving" in worker.stdout.readline()
    worker.terminate()
    worker.wait(timeout=15)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.2)
    raise AssertionError(f"something still listens on {port} after the worker stopped")


def test_a_worker_refuses_to_serve_beyond_loopback_and_a_port_in_use(isolated_home: Path) -> None:
    def worker(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app", "worker", *flags],
            env={**os.environ, "HEARTH_HOME": str(isolated_home)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    exposed = worker("--host", "0.0.0.0")
    assert exposed.returncode == 1
    assert "no authentication or encryption" in exposed.stderr and "127.0.0.1" in exposed.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = worker("--port", str(port))
    assert busy.returncode == 1
    assert f"Cannot listen on 127.0.0.1:{port}" in busy.stderr


def _chat(home: Path, model: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "chat",
            "--model",
            str(model),
            "--temperature",
            "0",
            "--max-tokens",
            "24",
            *flags,
            "Name three primary colours.",
        ],
        env={**os.environ, "HEARTH_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_hearth_answers_through_its_engine_with_the_layers_on_the_workers(
    workers: list[str], embedded_model: Path, isolated_home: Path
) -> None:
    alone = _chat(isolated_home, embedded_model)
    flags = [flag for worker in workers for flag in ("--worker", worker)]
    split = _chat(isolated_home, embedded_model, "--backend", "pipeline", *flags)
    assert alone.returncode == 0 and split.returncode == 0, split.stderr[-2000:]
    assert split.stdout == alone.stdout and len(alone.stdout.strip()) > 10


def test_a_worker_that_is_not_there_is_named_instead_of_an_abort(embedded_model: Path, isolated_home: Path) -> None:
    absent = f"127.0.0.1:{free_port()}"
    failed = _chat(isolated_home, embedded_model, "--backend", "pipeline", "--worker", absent)
    assert failed.returncode == 1
    assert f"The worker at {absent} does not answer" in failed.stderr
    assert "SIGABRT" not in failed.stderr


def test_a_worker_killed_mid_answer_ends_the_answer_naming_it_and_the_next_question_works_without_it(
    workers: list[str], embedded_model: Path, isolated_home: Path
) -> None:
    from app.errors import EngineStopped
    from app.services.chat import TurnSaved, TurnStarted
    from app.services.container import build_services
    from app.settings import load_settings
    from backends.base import GenerationParams, TextDelta

    services = build_services(
        load_settings(model={"context_length": 1024}, backend={"name": "pipeline", "workers": workers, "threads": 1})
    )
    try:
        list(services.control.start())
        assert services.runtime.status.state == "ready"
        victim = _worker_process_on(int(workers[0].rsplit(":", 1)[1]))
        seen: list[object] = []
        long = GenerationParams(temperature=0.7, max_new_tokens=400, seed=3)
        with pytest.raises(EngineStopped) as caught:
            for event in services.chat.send(None, "Write a long story about the sea.", long, "You tell stories."):
                seen.append(event)
                if sum(isinstance(e, TextDelta) for e in seen) == 10:
                    os.kill(victim, signal.SIGKILL)
        assert caught.value.message == f"Worker {workers[0]} stopped; continuing without it."
        started = seen[0]
        assert isinstance(started, TurnStarted)
        stored = services.store.get(started.conversation_id).messages
        assert stored[-1].role == "assistant" and stored[-1].content  # what was written is kept

        deadline = time.monotonic() + 120
        while services.runtime.status.state != "ready" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert services.runtime.status.state == "ready", services.runtime.status
        assert services.runtime.choice is not None and services.runtime.choice.prefs.workers == (workers[1],)
        follow_up = list(services.chat.send(started.conversation_id, "And then?", GenerationParams(0.0, 12), "s"))
        assert isinstance(follow_up[-1], TurnSaved) and follow_up[-1].message.content
    finally:
        services.close()


def _worker_process_on(port: int) -> int:
    """The `hearth worker` process serving ``port`` (its server child ends with it)."""
    import psutil

    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "worker" in cmdline and "--port" in cmdline and str(port) in cmdline:
            return int(process.pid)
    raise AssertionError(f"no hearth worker serves {port}")
