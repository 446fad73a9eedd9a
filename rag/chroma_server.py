"""A Chroma server that holds collections instead of the data folder: where it is, the token that proves
who is asking (read from a file, sent only over TLS or to this computer), the certificate authority that signs its
TLS, and a client for it whose failures name the server and what to do.

Chroma's own server (`chroma run`, from the chromadb package Hearth already uses) checks no one: whoever reaches its
port reads and writes every collection on it. A token is for a proxy in front of it that checks one (a web
server's reverse proxy with TLS). The address, the token and the certificate checks are pure
(:func:`chroma_server`); only :func:`server_client` talks to the server.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import ssl
import stat
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from models.shared.errors import HearthError, StorageError
from rag import chroma_http
from rag.chroma_http import bounded_get

DEFAULT_PORTS = {"http": 8000, "https": 443}  # `chroma run`'s own port; TLS through a proxy on the usual one
SETTING = "HEARTH_RAG__CHROMA_URL"


class ChromaServerSettingError(HearthError):
    """The Chroma server's address, token file or certificate file cannot be used as given."""

    page_remedy = (
        "Fix the Chroma server settings Hearth was started with (see Collections on a Chroma server in its "
        "documentation), then start it again."
    )


class ServerCollectionGone(StorageError):
    """A collection whose passages this Hearth added to the server is no longer there (deleted on the server, by
    another Hearth or by hand): searched, it would find nothing, and made again it would be empty."""

    page_remedy = "Delete the collection on the Documents tab, then add its files again."


class ChromaServerUnreachable(StorageError):
    """The Chroma server did not answer, refused the token, or presented a certificate that is not trusted."""

    page_remedy = (
        "Check that the Chroma server runs and that Hearth's settings for it (address, token, certificate) are "
        "right, then ask again; collections in the data folder work meanwhile."
    )


@dataclass(frozen=True)
class ChromaServer:
    url: str  # as given, for messages
    host: str
    port: int
    tls: bool
    token_file: Path | None = None
    ca_file: Path | None = None

    @property
    def shown(self) -> str:
        """The server as messages name it: its scheme, host and port."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


def chroma_server(url: str, token_file: Path | None = None, ca_file: Path | None = None) -> ChromaServer:
    """The server at ``url`` (``http://HOST[:PORT]`` or ``https://…``), checked before anything is sent to it: no
    credentials or path in the address (addresses are printed and logged), a token file that is this account's
    alone, a token only over TLS unless the server is on this computer, a certificate file that exists."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ChromaServerSettingError(
            f"{url!r} is not a Chroma server's address.",
            f"Write it as http://HOST:PORT or https://HOST:PORT in {SETTING}, or leave it unset to keep collections "
            "in the data folder.",
        )
    if parts.username or parts.password:
        raise ChromaServerSettingError(
            "The Chroma server's address holds a user name or password; addresses are shown in messages and logs.",
            "Put the token in a file of your own and name it in HEARTH_RAG__CHROMA_TOKEN_FILE.",
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ChromaServerSettingError(
            f"{url!r} has a path or query after the server; Hearth speaks to the server's own API at its root.",
            "Give only the scheme, host and port, for example http://127.0.0.1:8000.",
        )
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError:
        raise ChromaServerSettingError(
            f"{url!r} has a port that is not a number from 1 to 65535.", "Write it as http://HOST:PORT."
        ) from None
    tls = scheme == "https"
    if token_file is not None:
        _check_token_file(token_file)
        if not tls and not on_this_computer(parts.hostname):
            raise ChromaServerSettingError(
                f"A token would cross the network unencrypted to {parts.hostname} (the address is http://).",
                "Put TLS in front of the server and use https://, or leave the token out.",
            )
    if ca_file is not None and not ca_file.is_file():
        raise ChromaServerSettingError(
            f"The certificate authority file {ca_file} does not exist.",
            "Name the PEM file that signed the server's certificate in HEARTH_RAG__CHROMA_CA_FILE, or leave it unset "
            "to trust the system's authorities.",
        )
    return ChromaServer(url.strip(), parts.hostname, port, tls, token_file, ca_file)


def on_this_computer(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_token_file(path: Path) -> None:
    """The token file must be a file of this account's that no other account can read (like an SSH key)."""
    try:
        found = path.stat()
    except OSError as exc:
        raise ChromaServerSettingError(
            f"Cannot read the Chroma token file {path}: {exc.strerror}.",
            "Name a file that holds the token in HEARTH_RAG__CHROMA_TOKEN_FILE, or leave it unset.",
        ) from None
    if not stat.S_ISREG(found.st_mode):
        raise ChromaServerSettingError(f"The Chroma token file {path} is not a file.", "Name the file the token is in.")
    if found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise ChromaServerSettingError(
            f"The Chroma token file {path} can be read or changed by other accounts on this computer.",
            f"Make it yours alone: chmod 600 {path}.",
        )


def read_token(server: ChromaServer) -> str | None:
    """The token, read when the client is made (a changed file is read at the next start)."""
    if server.token_file is None:
        return None
    _check_token_file(server.token_file)
    token = server.token_file.read_text(encoding="utf-8").strip()
    if not token or any(c in token for c in "\r\n"):
        raise ChromaServerSettingError(
            f"The Chroma token file {server.token_file} is empty or holds more than one line.",
            "Put the token alone on the file's one line.",
        )
    return token


@contextlib.contextmanager
def answered(server: ChromaServer) -> Iterator[None]:
    """Requests to ``server``: its transport failing (refused, timed out, TLS, a proxy's refusal) as
    :class:`ChromaServerUnreachable`; what Chroma itself refused as a storage error naming the server."""
    import httpx
    from chromadb.errors import ChromaError

    try:
        yield
    except ChromaError as exc:
        raise StorageError(
            f"The Chroma server {server.shown} refused a request ({exc}).",
            "Check the server's log; the collection may have been changed by another Hearth.",
        ) from exc
    except httpx.HTTPError as exc:
        raise unreachable(server, exc) from exc


def unreachable(server: ChromaServer, error: BaseException) -> ChromaServerUnreachable:
    """What to say when a request to ``server`` failed in transport: refused, timed out, or TLS not trusted."""
    causes = _causes(error)
    bounded = next((cause for cause in causes if isinstance(cause, chroma_http.AnswerCut)), None)
    if bounded is not None:
        return ChromaServerUnreachable(
            f"The Chroma server {server.shown} did not answer as a server should ({bounded}).",
            "Check that the address is the Chroma server's own and that nothing in between changes its answers. "
            "Collections in the data folder work meanwhile.",
        )
    if any(isinstance(cause, ssl.SSLCertVerificationError) for cause in causes):
        return ChromaServerUnreachable(
            f"The Chroma server {server.shown} presented a certificate that is not trusted.",
            "Name the certificate authority that signed it in HEARTH_RAG__CHROMA_CA_FILE.",
        )
    if any(isinstance(cause, ssl.SSLError) for cause in causes):
        return ChromaServerUnreachable(
            f"TLS with the Chroma server {server.shown} failed ({_first_line(causes)}).",
            "Use https:// only for a server with TLS in front of it, http:// for `chroma run` itself.",
        )
    if any(_status(cause) in (401, 403) for cause in causes):
        return ChromaServerUnreachable(
            f"The Chroma server {server.shown} refused Hearth's token.",
            "Check the token in HEARTH_RAG__CHROMA_TOKEN_FILE against the one its proxy expects.",
        )
    return ChromaServerUnreachable(
        f"The Chroma server {server.shown} did not answer ({_first_line(causes)}).",
        "Start it (chroma run --path FOLDER --host 127.0.0.1 --port PORT) or check "
        f"{SETTING}. Collections in the data folder work meanwhile.",
    )


def _causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _first_line(causes: list[BaseException]) -> str:
    deepest = causes[-1]
    said = str(deepest).strip().splitlines()
    return said[0] if said else type(deepest).__name__


def server_client(server: ChromaServer, timeout_s: float | None = None) -> Any:
    """Chroma's HTTP client for ``server`` (it asks the server for its default tenant at once: an unreachable
    server fails here). Every request, from the first, is bounded (``rag.chroma_http``). No telemetry: Chroma's own
    is off."""
    import httpx
    from chromadb.config import Settings

    from rag.chroma_bounded_api import BoundedClient

    timeout_s = chroma_http.READ_TIMEOUT_S if timeout_s is None else timeout_s
    token = read_token(server)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    authorities = str(server.ca_file) if server.ca_file else None
    # A server that does not answer at all is named at once, before Chroma's client is built.
    try:
        answer = bounded_get(
            f"{server.shown}/api/v2/heartbeat",
            chroma_http.DEADLINE_S,
            headers=headers,
            verify=ssl.create_default_context(cafile=authorities),
            timeout=timeout_s,
        )
        answer.raise_for_status()
    except httpx.HTTPError as exc:
        raise unreachable(server, exc) from exc
    # What chromadb.HttpClient sets; the client is Hearth's, whose requests are bounded from the first.
    settings = Settings(
        anonymized_telemetry=False,
        chroma_server_ssl_verify=authorities,
        chroma_api_impl="chromadb.api.fastapi.FastAPI",
        chroma_server_host=server.host,
        chroma_server_http_port=server.port,
        chroma_server_ssl_enabled=server.tls,
        chroma_server_headers=headers or None,
    )
    try:
        with warnings.catch_warnings():  # Chroma hands httpx the file's name, which httpx calls deprecated
            warnings.simplefilter("ignore", DeprecationWarning)
            return BoundedClient(settings=settings)
    except (httpx.HTTPError, ValueError) as exc:  # Chroma says ValueError for a server it cannot reach
        raise unreachable(server, exc) from exc
