"""The encrypted link to workers, on loopback with real TLS: a worker's identity is made once and kept private,
the main refuses any certificate but the pinned one and anything that is not TLS, and bytes relayed through the link
arrive whole in both directions."""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from backends.workers.secure_link import LinkRefused, carry, connect, load_or_create_identity, server_context

pytestmark = pytest.mark.integration


def _serve_once(handle: Callable[[socket.socket], None]) -> tuple[int, threading.Thread]:
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        with listener:
            connection, _ = listener.accept()
            with connection:
                handle(connection)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return int(listener.getsockname()[1]), thread


@pytest.fixture
def tls_echo(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A TLS server that sends back everything it reads, and its certificate's fingerprint."""
    identity = load_or_create_identity(tmp_path / "identity")
    context = server_context(identity)

    def echo(connection: socket.socket) -> None:
        with context.wrap_socket(connection, server_side=True) as tls:
            while data := tls.recv(1 << 16):
                tls.sendall(data)

    port, thread = _serve_once(echo)
    yield port, identity.fingerprint
    thread.join(timeout=10)


def test_an_identity_is_made_once_kept_private_and_is_what_the_link_shows(tmp_path: Path) -> None:
    folder = tmp_path / "identity"
    first = load_or_create_identity(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(first.key_file.stat().st_mode) == 0o600
    assert load_or_create_identity(folder) == first  # the same certificate after a restart: pins stay valid
    der = ssl.PEM_cert_to_DER_cert(first.cert_file.read_text())
    assert first.fingerprint == hashlib.sha256(der).hexdigest()
    assert load_or_create_identity(tmp_path / "another").fingerprint != first.fingerprint


def test_any_certificate_but_the_pinned_one_is_refused(tls_echo: tuple[int, str]) -> None:
    port, _ = tls_echo  # the pinned one connects in the test below
    with pytest.raises(LinkRefused) as refused:
        connect("127.0.0.1", port, pin="0" * 64)
    assert "another certificate than the one pinned" in refused.value.message
    assert f"hearth workers remove 127.0.0.1:{port}" in refused.value.remedy


def test_a_server_that_does_not_speak_tls_or_never_answers_is_refused_or_times_out() -> None:
    port, thread = _serve_once(lambda connection: connection.sendall(b"HTTP/1.0 200 OK\r\n\r\nhello\n"))
    with pytest.raises(LinkRefused) as refused:
        connect("127.0.0.1", port, pin=None)
    assert "does not speak Hearth's encrypted link" in refused.value.message
    thread.join(timeout=10)
    silent = socket.create_server(("127.0.0.1", 0))
    with silent, pytest.raises(TimeoutError, match=r"^timed out$"):
        connect("127.0.0.1", int(silent.getsockname()[1]), pin=None, timeout_s=0.5)


def test_bytes_carried_through_the_link_arrive_whole_both_ways(tls_echo: tuple[int, str]) -> None:
    port, pinned = tls_echo
    link, seen = connect("127.0.0.1", port, pin=pinned)
    assert seen == pinned and link.version() == "TLSv1.3"
    ours, relay_end = socket.socketpair()
    relay = threading.Thread(target=carry, args=(relay_end, link), daemon=True)
    relay.start()
    payload = os.urandom(3 << 20)  # a layer's weights' worth, in many TLS records
    sender = threading.Thread(target=ours.sendall, args=(payload,), daemon=True)
    sender.start()
    received = bytearray()
    while len(received) < len(payload):
        chunk = ours.recv(1 << 20)
        assert chunk, "the relay closed early"
        received += chunk
    sender.join(timeout=10)
    assert bytes(received) == payload
    ours.close()  # one end closing ends the relay and closes the link
    relay.join(timeout=10)
    assert not relay.is_alive() and link.fileno() == -1
