"""Real Chroma servers for the tests of collections on a server: `chroma run` on loopback, started and
stopped by the test, and a small proxy in front of one that asks for a bearer token over TLS with a certificate made
for the test, as a reverse proxy in front of a real server would."""

from __future__ import annotations

import contextlib
import datetime
import http.server
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.helpers import free_port, require, stop_process

CHROMA = Path(sys.executable).with_name("chroma")


@dataclass
class ChromaProcess:
    url: str
    folder: Path
    port: int
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        stop_process(self.process)


def start_chroma(folder: Path, port: int | None = None) -> ChromaProcess:
    """`chroma run` keeping its data in ``folder``, on 127.0.0.1, answering its heartbeat."""
    require(CHROMA.exists() or shutil.which("chroma") is not None, "Chroma's server (chroma run)", "run `make setup`")
    port = port or free_port()
    log = (folder.parent / f"chroma-{port}.log").open("ab")
    env = os.environ | {"ANONYMIZED_TELEMETRY": "False"}
    command = [str(CHROMA), "run", "--path", str(folder), "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    running = ChromaProcess(f"http://127.0.0.1:{port}", folder, port, process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if httpx.get(f"{running.url}/api/v2/heartbeat", timeout=2).status_code == 200:
                return running
        except httpx.HTTPError:
            time.sleep(0.2)
    running.stop()
    raise AssertionError(f"chroma run did not start: {(folder.parent / f'chroma-{port}.log').read_text()[-2000:]}")


@contextmanager
def chroma_running(folder: Path, port: int | None = None) -> Iterator[ChromaProcess]:
    running = start_chroma(folder, port)
    try:
        yield running
    finally:
        running.stop()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that is its own authority, and its key: (certificate, key) PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hearth test chroma proxy")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "proxy.pem", folder / "proxy.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_file.chmod(0o600)
    return cert_file, key_file


class _Forward(http.server.BaseHTTPRequestHandler):
    server: TokenProxy

    def _forward(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {self.server.token}":
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.counting:
            self.server.forwarded += 1
        if self.server.hostile and self.server.hostile_path in self.path:
            self._misbehave(self.server.hostile)
            return
        time.sleep(self.server.delay_s)
        kind = self.headers.get("Content-Type", "application/json")
        answer = httpx.request(
            self.command, self.server.upstream + self.path, content=body, headers={"Content-Type": kind}, timeout=60
        )
        self.send_response(answer.status_code)
        self.send_header("Content-Type", answer.headers.get("content-type", "application/json"))
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def _misbehave(self, how: str) -> None:
        """``huge``: an answer that says it is 1.5 GB; ``endless``: one with no length that never ends;
        ``trickle``: the headers one byte every half second."""
        if how == "trickle":
            with contextlib.suppress(OSError):
                for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" * 100:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.5)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if how == "huge":
            self.send_header("Content-Length", str(1_500_000_000))
        self.end_headers()
        block = b"[" + b"0," * (1 << 19)
        with contextlib.suppress(OSError):
            for _ in range(3_000):  # 3 GB at most
                self.wfile.write(block)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

    def log_message(self, format: str, *args: object) -> None:
        del format, args


class TokenProxy(http.server.ThreadingHTTPServer):
    """HTTPS on 127.0.0.1 in front of ``upstream``, passing on only requests that carry ``token``, each after
    ``delay_s`` (a slow server, or a slow link to it)."""

    daemon_threads = True

    def __init__(self, upstream: str, token: str, cert_file: Path, key_file: Path, delay_s: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream, self.token, self.delay_s = upstream, token, delay_s
        self.hostile = ""  # "", or how requests whose path holds hostile_path are answered (_Forward._misbehave)
        self.hostile_path = ""
        self.forwarded = 0  # requests passed on (with the right token)
        self.counting = threading.Lock()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@contextmanager
def silent_server() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never answers; its number."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()
