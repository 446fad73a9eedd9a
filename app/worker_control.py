"""The worker's control port and the main's client for it: one JSON object per line each way (``backends/pairing.py``
has the messages). The worker keeps the tokens of the mains paired with it in its data folder (owner-only)."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import time
from pathlib import Path
from typing import Any

from app.errors import HearthError
from app.paths import write_private_text
from backends.pairing import WorkerState

MAX_LINE_BYTES = 4096
CONTROL_TIMEOUT_S = 5.0


class WorkerUnavailable(HearthError):
    """A worker's control port that cannot be reached or answers nonsense."""


class ControlServer:
    """Answers pairing, info and ping requests on ``host:port`` in daemon threads until :meth:`close`."""

    def __init__(self, host: str, port: int, state: WorkerState, tokens_file: Path) -> None:
        self._state = state
        self._tokens_file = tokens_file
        self._lock = threading.Lock()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            timeout = CONTROL_TIMEOUT_S

            def handle(self) -> None:
                with contextlib.suppress(OSError, ValueError):
                    while line := self.rfile.readline(MAX_LINE_BYTES + 1):
                        if len(line) > MAX_LINE_BYTES:
                            return
                        request = json.loads(line)
                        reply = outer.answer(request if isinstance(request, dict) else {})
                        self.wfile.write((json.dumps(reply) + "\n").encode())

        self._server = _Server((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="worker-control", daemon=True)
        self._thread.start()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            before = len(self._state.tokens)
            reply = self._state.answer(request)
            if len(self._state.tokens) != before:
                write_private_text(self._tokens_file, json.dumps(sorted(self._state.tokens)))
            return reply

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True  # a restarted worker takes its port back at once
    daemon_threads = True


def load_tokens(path: Path) -> set[str]:
    try:
        listed = json.loads(path.read_text())
    except (OSError, ValueError):
        return set()
    return {t for t in listed if isinstance(t, str)} if isinstance(listed, list) else set()


def ask(address: tuple[str, int], request: dict[str, Any], timeout_s: float = CONTROL_TIMEOUT_S) -> dict[str, Any]:
    """One request to a worker's control port, and its reply."""
    where = f"{address[0]}:{address[1]}"
    try:
        with socket.create_connection(address, timeout=timeout_s) as connection:
            connection.sendall((json.dumps(request) + "\n").encode())
            reply = connection.makefile("rb").readline(MAX_LINE_BYTES * 4)
    except OSError as exc:
        raise WorkerUnavailable(
            f"The worker at {where} does not answer ({exc.strerror or exc}).",
            "Check that `hearth worker` runs there and that the address is right.",
        ) from None
    try:
        parsed = json.loads(reply)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise WorkerUnavailable(
            f"{where} did not answer as a Hearth worker does.", "Give the address `hearth worker` printed there."
        )
    return parsed


def round_trip_ms(address: tuple[str, int], times: int = 5) -> float:
    """The median time of ``times`` pings on one connection, in milliseconds."""
    with socket.create_connection(address, timeout=CONTROL_TIMEOUT_S) as connection:
        reader = connection.makefile("rb")
        measured = []
        for _ in range(times):
            started = time.perf_counter()
            connection.sendall(b'{"op": "ping"}\n')
            reader.readline(MAX_LINE_BYTES)
            measured.append((time.perf_counter() - started) * 1000)
    return sorted(measured)[len(measured) // 2]
