"""The worker's control port and the main's client for it: TLS (``backends/workers/secure_link.py``), then one JSON
object per line each way (``backends/workers/pairing.py`` has the messages); a paired main's ``rpc`` request turns its
connection into llama.cpp's RPC stream to the worker's server on its private Unix socket. The worker keeps the tokens
of the mains paired with it in its data folder (owner-only).

Before a connection shows a paired main's token it is a stranger's: at most :data:`STRANGERS_PER_SOURCE` at once from
one source (a local account, or one address from elsewhere) and :data:`MAX_STRANGERS` in all (more are closed on
arrival), each cut :data:`STRANGER_S` after it arrived, however slowly it trickles (one watchdog thread for them all);
a line that is not one flat JSON object gets a one-line refusal. A source that has shown a paired main's token is
let in past the overall cap (never past its own), so strangers elsewhere cannot crowd out a paired main's heartbeat
or its next connection."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from app.paths import write_private_text
from app.peer_account import source_of
from backends.local_socket import connect as connect_local
from backends.local_socket import parse_local
from backends.workers.pairing import WorkerState, parse_request
from backends.workers.secure_link import Identity, LinkRefused, carry, connect, server_context
from models.shared.errors import HearthError

MAX_LINE_BYTES = 4096
CONTROL_TIMEOUT_S = 5.0
MAX_STRANGERS = 32
STRANGERS_PER_SOURCE = 4
STRANGER_S = 10.0


class WorkerUnavailable(HearthError):
    """A worker's control port that cannot be reached or answers nonsense."""


class ControlServer:
    """Answers pairing, info, ping and RPC requests on ``host:port`` (TLS with ``identity``) in daemon threads until
    :meth:`close`. ``announce`` gets each new pairing code; ``free_memory`` gives this machine's free memory now, read
    again for each ``info`` and ``pair`` answer (what the worker had free at its start says little an hour later)."""

    def __init__(
        self,
        host: str,
        port: int,
        state: WorkerState,
        identity: Identity,
        tokens_file: Path,
        announce: Callable[[str], None] = lambda code: None,
        free_memory: Callable[[], int] | None = None,
        on_pause: Callable[[], None] = lambda: None,
    ) -> None:
        self._state = state
        self._on_pause = on_pause
        self._free_memory = free_memory
        self._tokens_file = tokens_file
        self._announce = announce
        self._lock = threading.Lock()
        self._serving: dict[str, int] = {}  # token -> its RPC connections open now
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            timeout = CONTROL_TIMEOUT_S

            def handle(self) -> None:
                server = self.server
                assert isinstance(server, _Server)
                with contextlib.suppress(OSError, ValueError):
                    self.request.do_handshake()  # in this connection's thread, not the one accepting them
                    source = server.source(self.request)
                    while line := self.rfile.readline(MAX_LINE_BYTES + 1):
                        if len(line) > MAX_LINE_BYTES:
                            return
                        request = parse_request(line)
                        if isinstance(request, str):
                            self.wfile.write((json.dumps({"error": request, "remedy": _SAME_VERSION}) + "\n").encode())
                            return
                        reply = outer.answer(request, source)
                        if outer._state.paired(request) and "error" not in reply:
                            server.known(self.request)  # a paired main's: no longer a stranger's
                        if request.get("op") == "rpc" and reply.get("ok"):
                            outer.carry_rpc(self.request, str(request.get("token")), reply)
                            return
                        self.wfile.write((json.dumps(reply) + "\n").encode())
                        if request.get("op") == "sink" and "ready" in reply:
                            received = _drain(self.rfile, int(reply["ready"]))
                            self.wfile.write((json.dumps({"received": received}) + "\n").encode())

        self._server = _Server((host, port), Handler, server_context(identity))
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="worker-control", daemon=True)
        self._thread.start()

    def answer(self, request: dict[str, Any], source: str = "") -> dict[str, Any]:
        with self._lock:
            before, code, paused = len(self._state.tokens), self._state.code, self._state.paused
            if self._free_memory is not None and request.get("op") in ("info", "pair"):
                self._state.facts = dataclasses.replace(self._state.facts, free_bytes=self._free_memory())
            reply = self._state.answer(request, source, time.monotonic())
            token = request.get("token")
            if request.get("op") == "info" and "facts" in reply:
                reply["serving"] = any(self._serving.values())  # its free memory then excludes what a main loaded
            if request.get("op") == "rpc" and reply.get("ok"):
                if any(count for other, count in self._serving.items() if other != token):
                    # llama.cpp's server takes one client at a time: another main would wait on it without end
                    return {
                        "error": "This worker is serving another main Hearth now.",
                        "remedy": "Use it when that one is done with it, or start another `hearth worker`.",
                    }
                self._serving[str(token)] = self._serving.get(str(token), 0) + 1
            if len(self._state.tokens) != before:
                write_private_text(self._tokens_file, json.dumps(sorted(self._state.tokens)))
            if self._state.paused and not paused:
                self._on_pause()
            elif self._state.code != code and self._state.code:
                self._announce(self._state.code)
            return reply

    def renew_code(self) -> str:
        """A new code, at the owner's request (pairing resumes if it was paused)."""
        with self._lock:
            return self._state.renew_code()

    def carry_rpc(self, link: socket.socket, token: str, reply: dict[str, Any]) -> None:
        """Say yes, then carry llama.cpp's RPC stream between a paired main's link and the server on this machine's
        private socket; the connection counts as serving that main until it ends, however it ends."""
        try:
            link.sendall((json.dumps(reply) + "\n").encode())
            rpc = parse_local(self._state.facts.rpc)
            if rpc is None:
                return
            local = connect_local(rpc, CONTROL_TIMEOUT_S)
            carry(link, local)
        finally:
            with self._lock:
                self._serving[token] -= 1

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _drain(reader: Any, size: int) -> int:
    received = 0
    while received < size and (chunk := reader.read1(min(size - received, 1 << 20))):
        received += len(chunk)
    return received


_SAME_VERSION = "Use `hearth workers add` from the same Hearth version."


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True  # a restarted worker takes its port back at once
    daemon_threads = True
    # Room for a burst of connections while each is admitted or closed (socketserver's default is 5): past it the
    # system drops a new connection's first packet and its client tries again only a second or more later, so a
    # flood of strangers would hold back the owner's own connection by seconds.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[socketserver.BaseRequestHandler], tls: ssl.SSLContext):
        self._tls = tls
        # connections yet to show a token -> (when they are cut, who is at the other end)
        self._strangers: dict[socket.socket, tuple[float, str]] = {}
        self._sources: dict[socket.socket, str] = {}  # every open connection -> who is at its other end
        self._paired_sources: set[str] = set()  # sources that have shown a paired main's token
        self._strangers_lock = threading.Lock()
        super().__init__(address, handler)
        threading.Thread(target=self._watch, name="worker-control-watchdog", daemon=True).start()

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        try:
            source = source_of(address, connection.getsockname())
        except OSError:
            connection.close()
            raise
        with self._strangers_lock:
            refusal = admission(source, [who for _, who in self._strangers.values()], source in self._paired_sources)
            if refusal:
                connection.close()
                raise OSError(refusal)  # socketserver drops it
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            wrapped = self._tls.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
            self._strangers[wrapped] = (time.monotonic() + STRANGER_S, source)
            self._sources[wrapped] = source
        return wrapped, address

    def source(self, connection: socket.socket) -> str:
        with self._strangers_lock:
            return self._sources.get(connection, "")

    def known(self, connection: socket.socket) -> None:
        with self._strangers_lock:
            if self._strangers.pop(connection, None) is not None:
                self._paired_sources.add(self._sources.get(connection, ""))

    def shutdown_request(self, request: Any) -> None:
        with self._strangers_lock:
            self._strangers.pop(request, None)
            self._sources.pop(request, None)
        super().shutdown_request(request)

    def _watch(self) -> None:
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            with self._strangers_lock:
                overdue = [c for c, (deadline, _) in self._strangers.items() if deadline <= now]
                for connection in overdue:
                    del self._strangers[connection]
            for connection in overdue:
                with contextlib.suppress(OSError):
                    # the plain socket's shutdown: its thread's pending read ends at once (TLS's own would drop
                    # its state under that thread's feet)
                    socket.socket.shutdown(connection, socket.SHUT_RDWR)


def admission(source: str, strangers: list[str], paired_before: bool) -> str:
    """Why a new connection from ``source`` is refused while ``strangers`` (the source of each connection yet to show
    a token) are open, or "" when it is let in: at most :data:`STRANGERS_PER_SOURCE` from one source, and at most
    :data:`MAX_STRANGERS` in all unless ``source`` has shown a paired main's token before."""
    if strangers.count(source) >= STRANGERS_PER_SOURCE:
        return f"too many connections from {source} that have not shown a token"
    if len(strangers) >= MAX_STRANGERS and not paired_before:
        return "too many connections that have not shown a token"
    return ""


def load_tokens(path: Path) -> set[str]:
    try:
        listed = json.loads(path.read_text())
    except (OSError, ValueError):
        return set()
    return {t for t in listed if isinstance(t, str)} if isinstance(listed, list) else set()


def ask(
    address: tuple[str, int], request: dict[str, Any], pin: str | None, timeout_s: float = CONTROL_TIMEOUT_S
) -> tuple[dict[str, Any], str]:
    """One request to a worker's control port (refused unless its certificate is ``pin``, when given), its reply,
    and the fingerprint of the certificate it showed."""
    where = f"{address[0]}:{address[1]}"
    try:
        link, seen = connect(address[0], address[1], pin, timeout_s)
        with link:
            link.sendall((json.dumps(request) + "\n").encode())
            reply = link.makefile("rb").readline(MAX_LINE_BYTES * 4)
    except LinkRefused:
        raise
    except OSError as exc:
        raise WorkerUnavailable(
            f"The worker at {where} does not answer ({exc.strerror or exc}).",
            "Check that `hearth worker` runs there and that the address is right.",
            page_remedy="Check that Hearth's worker runs on that computer and that the address is the one it printed.",
        ) from None
    try:
        parsed = json.loads(reply)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise WorkerUnavailable(
            f"{where} did not answer as a Hearth worker does.",
            "Give the address `hearth worker` printed there.",
            page_remedy="Give the address Hearth's worker printed on that computer.",
        )
    return parsed, seen


def round_trip_ms(address: tuple[str, int], pin: str, times: int = 5) -> float:
    """The median time of ``times`` pings on one link, in milliseconds."""
    link, _ = connect(address[0], address[1], pin)
    with link:
        reader = link.makefile("rb")
        measured = []
        for _ in range(times):
            started = time.perf_counter()
            link.sendall(b'{"op": "ping"}\n')
            reader.readline(MAX_LINE_BYTES)
            measured.append((time.perf_counter() - started) * 1000)
    return sorted(measured)[len(measured) // 2]


def bandwidth_bytes_per_s(
    address: tuple[str, int], pin: str, token: str, size: int = 2 << 20, warm_up: int = 1 << 20
) -> float:
    """Bytes per second from here to the worker through its link: ``size`` bytes sent, timed until it says they
    all arrived (the round trip of that last answer included, which a real transfer pays too). ``warm_up`` bytes go
    first on the same connection, untimed: a new connection starts slowly (TCP's slow start takes a few round trips
    to open its window), while the engine's connections to a worker stay open and warm, so without it a link with
    a long round trip would look several times narrower than it is to the engine."""
    link, _ = connect(address[0], address[1], pin)
    with link:
        reader = link.makefile("rb")
        if warm_up > 0:
            _sink(link, reader, address, token, warm_up)
        elapsed = _sink(link, reader, address, token, size)
    return size / max(elapsed, 1e-9)


def _sink(link: socket.socket, reader: BinaryIO, address: tuple[str, int], token: str, size: int) -> float:
    """Sends ``size`` bytes to the worker's sink; the seconds until it said they all arrived."""
    link.sendall((json.dumps({"op": "sink", "token": token, "bytes": size}) + "\n").encode())
    ready = json.loads(reader.readline(MAX_LINE_BYTES) or b"{}")
    if ready.get("ready") != size:
        raise WorkerUnavailable(
            f"The worker at {address[0]}:{address[1]} refused the bandwidth test: {ready.get('error', '?')}",
            "Pair with it again.",
        )
    block = bytes(1 << 16)
    started = time.perf_counter()
    for offset in range(0, size, len(block)):
        link.sendall(block[: min(len(block), size - offset)])
    done = json.loads(reader.readline(MAX_LINE_BYTES) or b"{}")
    elapsed = time.perf_counter() - started
    if done.get("received") != size:
        raise WorkerUnavailable(f"The worker at {address[0]}:{address[1]} lost part of the test.", "Try again.")
    return elapsed
