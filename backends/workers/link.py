"""The engine's end of the links to paired workers: for each, a Unix socket in a folder only this account may enter
(``backends/local_socket.py``) that llama.cpp's RPC client connects to as if it were the worker; the relay carries
only connections from its own process (the kernel names the peer), each on through the encrypted link
(``backends/workers/secure_link.py``) to the worker, which hands it to its own llama.cpp RPC server. Another account can
neither reach the socket nor, through it, borrow this main's pairing token.

llama.cpp's RPC server serves one client at a time and makes the others wait without end; a connection whose first
request the worker has not answered within :data:`FIRST_ANSWER_S` is cut (llama.cpp then gives up on the load),
and the worker is named as the one that held it up.

llama.cpp waits for a worker's reply without a timeout, so a worker that hangs (stopped, or cut off by the network)
would hang the answer forever. While a relay carries anything it pings its worker every second on a link of its own,
kept open between pings and showing this main's token (so the worker counts it as a paired main's, never among the
strangers it caps); a ping that fails is tried again on a new link, and only a worker that has not answered for
:data:`HEARTBEAT_TIMEOUT_S` has its connections cut, llama.cpp gives up on it (ending the engine), and the
supervisor names the worker and plans without it."""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import socket
import threading
import time

from backends.base import WorkerLink
from backends.local_socket import SOCKET_NAME, LocalSocket, listen, peer_process, private_folder, remove_folder
from backends.workers.rpc import BadEndpoint, WorkerUnreachable, parse_endpoint
from backends.workers.secure_link import LINK_TIMEOUT_S, LinkRefused, carry, connect
from models.shared.errors import HearthError

HEARTBEAT_EVERY_S = 1.0
HEARTBEAT_TIMEOUT_S = 5.0
STOPPED_CHECK_S = 2.0
FIRST_ANSWER_S = 15.0
HELD_UP_LOG = "hearth.worker_held_up"  # one record per worker that held a load up; its message is the address
_relays: dict[WorkerLink, Relay] = {}
_relays_lock = threading.Lock()
log = logging.getLogger(__name__)


def open_rpc(link: WorkerLink, timeout_s: float = LINK_TIMEOUT_S) -> socket.socket:
    """A connection that carries llama.cpp's RPC to the worker of ``link``, through its encrypted link."""
    where = parse_endpoint(link.address)
    try:
        tls, _ = connect(where.host, where.port, link.fingerprint, timeout_s)
    except OSError as exc:
        raise WorkerUnreachable(
            f"The worker at {where} does not answer ({exc.strerror or exc}).",
            "Start `hearth worker` there (or check the address), or leave that worker out.",
            page_remedy="Start Hearth's worker there (or check the address), or remove it under Workers.",
        ) from None
    try:
        tls.sendall((json.dumps({"op": "rpc", "token": link.token}) + "\n").encode())
        reply = _read_line(tls)
    except OSError as exc:
        tls.close()
        raise WorkerUnreachable(f"The worker at {where} stopped answering ({exc}).", "Start it again.") from None
    if reply.get("ok") is not True:
        tls.close()
        raise LinkRefused(
            f"The worker at {where} refused: {reply.get('error', 'no reason given')}",
            str(reply.get("remedy", "Pair with it again: hearth workers add HOST:PORT --code CODE.")),
            page_remedy="Pair with it again under Workers (Hardware tab), with the code it prints.",
        )
    return tls


def answers(link: WorkerLink, timeout_s: float = LINK_TIMEOUT_S) -> bool:
    """Whether the worker of ``link`` answers a ping through its link within ``timeout_s`` (a stopped or cut-off
    worker may still have its connections accepted by the system, so a bare connect says nothing)."""
    pulse = Pulse(link)
    try:
        return pulse.ping(timeout_s)
    finally:
        pulse.close()


def stopped_workers(
    workers: tuple[str, ...], links: tuple[WorkerLink, ...], timeout_s: float = STOPPED_CHECK_S
) -> tuple[str, ...]:
    """Those of ``workers`` that do not answer now: through their link, or, for one without, by connecting. Asked
    after the engine has ended, when a live worker is idle and answers at once: all at the same time, each within
    ``timeout_s``, so a cut-off worker delays naming it by that and no more."""
    from concurrent.futures import ThreadPoolExecutor

    from backends.workers.rpc import reachable

    by_address = {str(parse_endpoint(link.address)): link for link in links}

    def alive(worker: str) -> bool:
        link = by_address.get(str(parse_endpoint(worker)))
        return answers(link, timeout_s) if link is not None else reachable(parse_endpoint(worker), timeout_s)

    if not workers:
        return ()
    with ThreadPoolExecutor(max_workers=len(workers), thread_name_prefix="worker-check") as pool:
        answered = list(pool.map(alive, workers))
    return tuple(worker for worker, up in zip(workers, answered, strict=True) if not up)


def _read_line(connection: socket.socket) -> dict[str, object]:
    # byte by byte: whatever follows the line is llama.cpp's, and a buffered reader could swallow some of it
    line = bytearray()
    while not line.endswith(b"\n") and len(line) < 4096:
        byte = connection.recv(1)
        if not byte:
            break
        line += byte
    try:
        parsed = json.loads(line)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class Pulse:
    """The heartbeat's link to one worker: opened when first needed, kept open between pings, opened again when it
    breaks. Each ping shows the main's token, so the worker counts the link as a paired main's."""

    def __init__(self, link: WorkerLink) -> None:
        self.link = link
        self._tls: socket.socket | None = None

    def ping(self, timeout_s: float) -> bool:
        """Whether the worker answered within ``timeout_s`` (the kept link first; if it broke, a new one)."""
        deadline = time.monotonic() + timeout_s
        for _ in range(2):
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                return False
            try:
                if self._tls is None:
                    where = parse_endpoint(self.link.address)
                    self._tls, _ = connect(where.host, where.port, self.link.fingerprint, left_s)
                self._tls.settimeout(max(deadline - time.monotonic(), 0.01))
                self._tls.sendall((json.dumps({"op": "ping", "token": self.link.token}) + "\n").encode())
                if _read_line(self._tls).get("pong") is True:
                    return True
            except (OSError, HearthError):
                pass
            self.close()
        return False

    def close(self) -> None:
        if self._tls is not None:
            with contextlib.suppress(OSError):
                self._tls.close()
            self._tls = None


class Relay:
    """A private Unix socket whose connections, from this process only, go on to one worker through its link,
    until the process ends."""

    def __init__(
        self,
        link: WorkerLink,
        heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S,
        first_answer_s: float = FIRST_ANSWER_S,
    ) -> None:
        self.link = link
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._first_answer_s = first_answer_s
        folder = private_folder("hearth-relay-")
        atexit.register(remove_folder, folder)
        self.endpoint = LocalSocket(folder / SOCKET_NAME)
        self._listener = listen(self.endpoint.path)
        self._carrying: set[socket.socket] = set()  # the llama.cpp ends of the connections being carried
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"relay-{link.address}", daemon=True).start()
        threading.Thread(target=self._heartbeat, name=f"heartbeat-{link.address}", daemon=True).start()

    def _heartbeat(self) -> None:
        pulse = Pulse(self.link)
        heard = time.monotonic()  # when the worker last answered, or the relay last had nothing to carry
        while True:
            time.sleep(HEARTBEAT_EVERY_S)
            with self._lock:
                busy = bool(self._carrying)
            if not busy:
                pulse.close()
                heard = time.monotonic()
                continue
            left_s = self._heartbeat_timeout_s - (time.monotonic() - heard)
            if pulse.ping(max(left_s, HEARTBEAT_EVERY_S / 2)):
                heard = time.monotonic()
                continue
            if time.monotonic() - heard < self._heartbeat_timeout_s:
                continue  # one ping lost (a new link refused, a slow answer): the next one may get through
            heard = time.monotonic()
            log.error(
                "the worker at %s has not answered for %.0f s; cutting its link",
                self.link.address,
                self._heartbeat_timeout_s,
            )
            with self._lock:
                for local in self._carrying:
                    with contextlib.suppress(OSError):
                        local.shutdown(socket.SHUT_RDWR)  # carry() sees the end and closes both sides

    def _accept(self) -> None:
        while True:
            try:
                local, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(local,), name="relay-link", daemon=True).start()

    def _carry(self, local: socket.socket) -> None:
        peer = peer_process(local)
        if peer != os.getpid():  # the folder already keeps other accounts out; this keeps out this account's others
            log.warning("the relay to %s refused a connection from process %d", self.link.address, peer)
            local.close()
            return
        try:
            remote = open_rpc(self.link)
        except HearthError:
            local.close()  # llama.cpp sees the worker gone; the engine's supervisor names it
            return
        with contextlib.suppress(OSError):
            remote.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._carrying.add(local)
        try:
            if self._first_answer(local, remote):
                carry(local, remote)
            else:
                local.close()
                remote.close()
        finally:
            with self._lock:
                self._carrying.discard(local)

    def _first_answer(self, local: socket.socket, remote: socket.socket) -> bool:
        """Passes llama.cpp's first request to the worker and the worker's first answer back; False (after naming
        the worker) when none came within the deadline, or when either end closed first."""
        try:
            request = local.recv(1 << 16)
            if not request:
                return False
            remote.sendall(request)
            remote.settimeout(self._first_answer_s)
            try:
                answer = remote.recv(1 << 16)
            except TimeoutError:
                answer = b""
            remote.settimeout(None)
            if not answer:
                # Nothing within the deadline, or the worker hung up unanswered: its own connection to its server
                # waits in a full queue behind the one the server is busy with. (A worker that died is named as
                # stopped instead: it no longer answers pings.)
                log.error(
                    "the worker at %s did not answer within %.0f s: its llama.cpp server is held by another "
                    "connection; giving up on it",
                    self.link.address,
                    self._first_answer_s,
                )
                logging.getLogger(HELD_UP_LOG).error("%s", self.link.address)
                return False
            local.sendall(answer)
        except OSError:
            return False
        return True


def local_endpoints(workers: tuple[str, ...], links: tuple[WorkerLink, ...]) -> tuple[LocalSocket, ...]:
    """Where llama.cpp reaches each of ``workers``: the relay of its link, started once per process, after checking
    the link works (llama.cpp aborts the process on a worker it cannot reach). A worker must be paired: llama.cpp's
    RPC is never reached at a bare address, not even on this machine."""
    by_address = {str(parse_endpoint(link.address)): link for link in links}
    endpoints = []
    for worker in workers:
        where = parse_endpoint(worker)
        link = by_address.get(str(where))
        if link is None:
            raise BadEndpoint(
                f"The worker at {where} is not paired: Hearth reaches llama.cpp's RPC only through a paired "
                "worker's encrypted link, never at a bare address.",
                f"Start `hearth worker` there and pair with it: hearth workers add {where} --code CODE.",
                page_remedy="Start Hearth's worker there and pair with it under Workers (Hardware tab).",
            )
        with _relays_lock:
            relay = _relays.get(link)
            if relay is None:
                open_rpc(link).close()  # reachable, the pinned certificate, a token it knows: or a clear error
                relay = _relays[link] = Relay(link)
        endpoints.append(relay.endpoint)
    return tuple(endpoints)
