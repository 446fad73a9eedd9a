"""The encrypted link between a main Hearth and a `hearth worker` on another machine: TLS 1.3 to the worker's
self-signed certificate, whose fingerprint the main pins when it pairs (the pairing proof covers the fingerprint the
main saw, so a machine in the middle cannot pair in the worker's place). The main then proves itself with the token
it got at pairing, inside the encrypted link.

ggml's RPC has neither authentication nor encryption: it only ever listens on the worker's loopback, and its bytes
cross the network only through :func:`carry` on both ends of such a link.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import selectors
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from models.shared.errors import HearthError

LINK_TIMEOUT_S = 5.0
CERT_FILE = "certificate.pem"
KEY_FILE = "key.pem"
_CHUNK = 1 << 20


class LinkRefused(HearthError):
    """The other end is not the worker this Hearth paired with, or does not speak TLS."""


@dataclass(frozen=True)
class Identity:
    """A worker's certificate and private key (owner-only files), and the fingerprint mains pin."""

    cert_file: Path
    key_file: Path
    fingerprint: str


def fingerprint(der: bytes) -> str:
    """SHA-256 of a certificate (DER), as hex: what a main pins."""
    return hashlib.sha256(der).hexdigest()


def load_or_create_identity(folder: Path) -> Identity:
    """The worker's identity from ``folder``, made there the first time (a new one means pairing again)."""
    import fcntl

    cert_file, key_file = folder / CERT_FILE, folder / KEY_FILE
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    # workers started together in one data folder make one identity, not one each that overwrite each other
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cert_file.is_file() and key_file.is_file()):
            _create(cert_file, key_file)
        der = ssl.PEM_cert_to_DER_cert(cert_file.read_text())
    return Identity(cert_file, key_file, fingerprint(der))


def _create(cert_file: Path, key_file: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Hearth worker")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_private(key_file, key_pem)
    _write_private(cert_file, certificate.public_bytes(serialization.Encoding.PEM))


def _write_private(path: Path, data: bytes) -> None:
    partial = path.with_suffix(".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    partial.replace(path)


def server_context(identity: Identity) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_cert_chain(identity.cert_file, identity.key_file)
    return context


def _client_context() -> ssl.SSLContext:
    # No certificate authority vouches for a worker: the main checks the fingerprint it pinned instead (below).
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def connect(host: str, port: int, pin: str | None, timeout_s: float = LINK_TIMEOUT_S) -> tuple[ssl.SSLSocket, str]:
    """A TLS connection to ``host:port`` and the fingerprint of the certificate it showed; with ``pin``, one that
    showed any other certificate is closed and refused. Connection failures are ``OSError``s."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    raw = socket.create_connection((host, port), timeout=timeout_s)
    try:
        link = _client_context().wrap_socket(raw)
    except ssl.SSLError as exc:
        raw.close()
        raise LinkRefused(
            f"{where} does not speak Hearth's encrypted link ({exc.reason or exc}).",
            "Give the address `hearth worker` printed there, and run the same Hearth version on both machines.",
            page_remedy="Give the address Hearth's worker printed there, and run the same Hearth version on both.",
        ) from None
    except TimeoutError:
        raw.close()
        raise TimeoutError("timed out") from None  # not the ssl module's "_ssl.c:…: The handshake operation …"
    except OSError:
        raw.close()
        raise
    der = link.getpeercert(binary_form=True)
    seen = fingerprint(der) if der else ""
    if pin is not None and seen != pin:
        link.close()
        raise LinkRefused(
            f"The worker at {where} showed another certificate than the one pinned when this Hearth paired with it.",
            f"If that worker was set up again, pair again: hearth workers remove {where}; hearth workers add {where} "
            "--code CODE. Otherwise something else answers at that address.",
            page_remedy="If that worker was set up again, remove it under Workers and pair again with the code it "
            "prints. Otherwise something else answers at that address.",
        )
    return link, seen


def carry(one: socket.socket, other: socket.socket) -> None:
    """Copy bytes both ways between two connected sockets until either end closes (what one end sent before closing
    is still delivered), then close both. One thread and non-blocking sockets: a TLS socket is never used from two
    threads at once, and a read that only finds TLS's own records (a session ticket) never blocks the other way."""
    ends = (one, other)
    pending: dict[socket.socket, bytearray] = {one: bytearray(), other: bytearray()}  # to be written to that end
    peer = {one: other, other: one}
    open_ends = {one, other}
    watch = selectors.DefaultSelector()
    for end in ends:
        end.setblocking(False)
        watch.register(end, selectors.EVENT_READ)
    try:
        while open_ends == {one, other} or any(pending[end] for end in open_ends):
            for end in ends:
                wants = _wants(end, pending, peer, open_ends) or selectors.EVENT_READ  # idle: still sees a reset
                if watch.get_key(end).events != wants:  # a system call saved per message when nothing changed
                    watch.modify(end, wants)
            selected = {key.fd for key, _ in watch.select()}
            # TLS may hold decrypted bytes the selector cannot see
            ready = [end for end in ends if end.fileno() in selected or (end in open_ends and _holds_bytes(end))]
            for end in ready:
                if pending[end]:
                    _write(end, pending[end])
                if end in open_ends and len(pending[peer[end]]) < _CHUNK * 4 and not _read(end, pending[peer[end]]):
                    open_ends.discard(end)
                    if not pending[peer[end]]:
                        return
    except OSError:
        return
    finally:
        watch.close()
        for end in ends:
            end.close()


def _holds_bytes(end: socket.socket) -> bool:
    return isinstance(end, ssl.SSLSocket) and end.pending() > 0


def _wants(
    end: socket.socket,
    pending: dict[socket.socket, bytearray],
    peer: dict[socket.socket, socket.socket],
    open_ends: set[socket.socket],
) -> int:
    wants = selectors.EVENT_WRITE if pending[end] else 0
    if end in open_ends and len(pending[peer[end]]) < _CHUNK * 4:  # stop reading while the other end lags
        wants |= selectors.EVENT_READ
    return wants


def _read(source: socket.socket, into: bytearray) -> bool:
    """Read what ``source`` has into ``into``; False once it has closed."""
    try:
        data = source.recv(_CHUNK)
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return True  # nothing for us yet (a partial record, or TLS's own messages)
    if not data:
        return False
    into += data
    return True


def _write(target: socket.socket, queued: bytearray) -> None:
    try:
        sent = target.send(queued[:_CHUNK])
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return
    del queued[:sent]
