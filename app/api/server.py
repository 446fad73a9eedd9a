"""One HTTP server on one port: the API under ``/v1`` and the Gradio page at ``/``, both behind the guard
(``app.api.middleware``), run by uvicorn on a thread of its own.

The socket is bound here, before the server thread starts, so a port that is taken is an ``OSError`` in the
caller, and port 0 (tests) picks a free port whose number the Host rule then knows.
"""

from __future__ import annotations

import hmac
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from app.api.control import build_control_router
from app.api.embedding_jobs import EmbeddingJobs
from app.api.idle import idle_closing_protocol
from app.api.keys import ApiKeyStore
from app.api.middleware import Guard
from app.api.page_gate import PageGate, new_page_secret
from app.api.page_headers import SecurityHeaders
from app.api.policy import WILDCARD_HOSTS, AccessPolicy, access_policy
from app.api.routes import build_router
from app.services.container import Services
from models.shared.errors import HearthError

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 120.0
# Open event streams (the page's queue, streamed answers) would hold a shutdown forever; cut them after this.
GRACEFUL_SHUTDOWN_S = 3
PAGE_LOGIN_MESSAGE = (
    "Hearth is reachable from other machines, so the page asks for its key. Any user name; the password is the "
    "key that <code>hearth api-key</code> prints on the computer running Hearth."
)


@dataclass
class RunningServer:
    url: str  # the page's plain address: http://127.0.0.1:7860/
    api_url: str  # the base URL for OpenAI clients: http://127.0.0.1:7860/v1
    port: int
    _server: uvicorn.Server
    _thread: threading.Thread
    # The address the owner opens: on loopback the page's with this start's secret (app.api.page_gate), which
    # only the owner may see; beyond loopback the plain one (the page asks for the API key there).
    entry_url: str = ""
    gate: PageGate | None = None
    embeddings: EmbeddingJobs | None = None

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.embeddings is not None:
            self.embeddings.close(wait_s=0)  # cancel first, so the requests in flight end within a slice
        self._server.should_exit = True
        self._thread.join(timeout_s)
        if self.embeddings is not None:
            # Their threads must be done before the interpreter shuts down under torch (a native abort).
            self.embeddings.close()

    def block_thread(self) -> None:
        """Wait until the server stops (Ctrl+C stops it)."""
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()


def shown_host(host: str) -> str:
    """The address a person on this machine types: loopback for a wildcard bind."""
    if host in WILDCARD_HOSTS:
        return "127.0.0.1"
    return f"[{host.strip('[]')}]" if ":" in host else host


def build_app(
    services: Services,
    page: Any,
    page_options: Mapping[str, Any],
    policy: AccessPolicy,
    keys: ApiKeyStore,
    gate: PageGate | None = None,
    embeddings: EmbeddingJobs | None = None,
) -> ASGIApp:
    import gradio as gr

    # No /docs or /redoc: their pages load scripts from a CDN, and Hearth never reaches the internet.
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(build_control_router(services))  # before the /v1 catch-all of build_router
    app.include_router(build_router(services, embeddings))
    gr.mount_gradio_app(
        app,
        page,
        path="/",
        server_name=services.settings.server.host,
        server_port=policy.port,
        auth=page_login(keys) if policy.exposed else None,
        auth_message=PAGE_LOGIN_MESSAGE if policy.exposed else None,
        ssr_mode=False,  # server-side rendering would start a Node process
        mcp_server=False,
        show_error=True,
        # Gradio refuses a larger file in the browser before sending it, and on the server before it is kept in
        # its temporary folder; a file over the documents' own limit could never be indexed anyway.
        max_file_size=upload_limit_bytes(services),
        # What the page may show besides its own uploads: the Models tab's charts.
        allowed_paths=[str(services.paths.ladders_dir)],
        **page_options,
    )
    # Gradio checks that a file a client names is one of its uploads only once the app is marked as launched,
    # which mounting never does: without this, any path on the computer is copied into its cache and handed to
    # the page's handlers (they check again: app.ui.page_uploads).
    page.has_launched = True
    return SecurityHeaders(Guard(app, policy, keys.get, gate=gate))


def upload_limit_bytes(services: Services) -> int:
    return services.settings.rag.max_file_mb << 20


def page_login(keys: ApiKeyStore) -> Callable[[str, str], bool]:
    def check(_user: str, password: str) -> bool:
        return hmac.compare_digest(password.strip().encode(), keys.get().encode())

    return check


def start_server(
    services: Services, page: Any, page_options: Mapping[str, Any] | None = None, page_secret: str | None = None
) -> RunningServer:
    """Serve ``page`` (a Gradio Blocks with its queue set up) and the API; return once requests are answered.

    On loopback the page answers only requests that carry ``page_secret`` (a new one per start unless the caller
    brings its own, as a window that opens the page does): ``entry_url`` is the address that carries it."""
    settings = services.settings.server
    listener = listen(settings.host, settings.port)
    port = int(listener.getsockname()[1])
    keys = ApiKeyStore(services.paths.api_key_file)
    keys.get()  # made at first start, so the page and `hearth api-key` show the same key from then on
    names = machine_names() if settings.host in WILDCARD_HOSTS else []
    policy = access_policy(settings.host, port, settings.allowed_hosts, settings.allowed_origins, names)
    gate = None if policy.exposed else PageGate(port, page_secret or new_page_secret())
    embeddings = EmbeddingJobs()
    app = build_app(services, page, page_options or {}, policy, keys, gate, embeddings)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        http=idle_closing_protocol(settings.idle_timeout_s),
    )
    server = uvicorn.Server(config)
    _quiet_shutdown_cancellations()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="hearth-web", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            listener.close()
            raise HearthError(
                f"The web server on port {port} did not start.",
                "Run Hearth with --verbose to see why, or pass --port with another number.",
            )
        time.sleep(0.02)
    base = f"http://{shown_host(settings.host)}:{port}"
    entry = f"{base}{gate.entry_path()}" if gate is not None else f"{base}/"
    return RunningServer(f"{base}/", f"{base}/v1", port, server, thread, entry, gate, embeddings)


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        # As uvicorn would: a port left in TIME_WAIT by the previous run is free.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host.strip("[]"), port))
        listener.listen(2048)
    except OSError:
        listener.close()
        raise
    listener.set_inheritable(False)
    return listener


def machine_names() -> list[str]:
    """This machine's host name and interface addresses: how other machines name it when Hearth listens on
    every interface."""
    import psutil

    names = {socket.gethostname(), socket.getfqdn()}
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family in (socket.AF_INET, socket.AF_INET6):
                names.add(address.address.split("%")[0])  # drop an IPv6 zone ("fe80::1%eth0")
    return sorted(name for name in names if name)


class _ShutdownCancellation(logging.Filter):
    """Drops uvicorn's "Exception in ASGI application" for a request it cancelled itself while shutting down (the
    graceful wait ran out): the request was stopped on purpose, and its work told to stop; nothing failed."""

    def filter(self, record: logging.LogRecord) -> bool:
        import asyncio

        cancelled = record.exc_info is not None and isinstance(record.exc_info[1], asyncio.CancelledError)
        return not cancelled


def _quiet_shutdown_cancellations() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _ShutdownCancellation) for f in logger.filters):
        logger.addFilter(_ShutdownCancellation())
