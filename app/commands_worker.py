"""``hearth worker``: this machine's CPU served to llama.cpp over its RPC protocol, for a Hearth that splits a
model's layers across machines. Loopback only until Hearth's own encrypted, paired channel carries the traffic
(ggml's RPC has neither authentication nor encryption)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from app.errors import HearthError
from app.terminal_text import for_terminal
from app.wording import plural
from backends.rpc import BadEndpoint, Endpoint

EXIT_OK = 0
LISTEN_WAIT_S = 30.0


def run_worker(host: str, port: int, threads: int | None, cache_dir: Path) -> int:
    from app.commands import ensure_port_free, exit_on_terminate

    endpoint = Endpoint(host, port)
    if not endpoint.loopback:
        raise BadEndpoint(
            f"A worker serves llama.cpp's RPC, which has no authentication or encryption; Hearth does not expose "
            f"it on {host}.",
            "Serve on 127.0.0.1 (the default) and reach it through an SSH tunnel from the main machine for now.",
        )
    ensure_port_free(host, port)
    threads = threads or max((os.cpu_count() or 2) // 2, 1)
    child = subprocess.Popen(
        [sys.executable, "-m", "backends.rpc_worker", str(endpoint), str(cache_dir), str(threads)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # llama.cpp's banner; Hearth says what matters below
        start_new_session=True,  # Ctrl+C reaches this process, which ends the server
    )
    previous = signal.signal(signal.SIGTERM, exit_on_terminate)  # `kill PID` stops the server too
    try:
        _wait_listening(endpoint, child)
        print(
            f"Hearth worker: serving this machine's CPU ({plural(threads, 'thread')}) on {endpoint} (Ctrl+C to stop).",
            flush=True,
        )
        print(f"  Tensors clients send are kept in {for_terminal(str(cache_dir))}.", flush=True)
        code = child.wait()
        raise HearthError(
            f"The worker's server ended by itself (status {code}).", "Start it again; `hearth -v worker` says more."
        )
    except KeyboardInterrupt:
        print("\nWorker stopped.", file=sys.stderr)
        return EXIT_OK
    finally:
        signal.signal(signal.SIGTERM, previous)
        if child.poll() is None:
            child.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
            if child.poll() is None:
                child.kill()
                child.wait()


def _wait_listening(endpoint: Endpoint, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + LISTEN_WAIT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise HearthError(
                f"The worker's server could not start on {endpoint} (status {child.returncode}).",
                "Check that this llama.cpp build has RPC (`hearth doctor` says) and that the port is free.",
            )
        with contextlib.suppress(OSError), socket.create_connection((endpoint.host, endpoint.port), timeout=1):
            return
        time.sleep(0.1)
    raise HearthError(f"The worker's server did not listen on {endpoint} within 30 s.", "Start it again.")
