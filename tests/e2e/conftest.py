"""A real `hearth ui` process and a real headless Chromium driven by Playwright."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.helpers import free_port, require, stop_process

pytestmark = pytest.mark.e2e

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]


@dataclass
class RunningApp:
    url: str  # the plain address
    home: Path
    process: subprocess.Popen[str]
    log: Path
    remote_requests: list[str] = field(default_factory=list)
    csp_violations: list[str] = field(default_factory=list)  # what Chromium refused under the page's policy
    entry_url: str = ""  # the address `hearth ui` printed for its owner (with the page secret on loopback)

    @property
    def port(self) -> int:
        return int(self.url.rstrip("/").rsplit(":", 1)[1])

    @property
    def cookies(self) -> dict[str, str]:
        """The page secret's cookie, as the owner's browser holds it after opening ``entry_url`` (none when the
        page asks for the key instead)."""
        token = parse_qs(urlsplit(self.entry_url).query).get("token")
        return {f"hearth-page-{self.port}": token[0]} if token else {}

    def stop(self) -> None:
        stop_process(self.process)


def launch(args: Sequence[str], home: Path, port: int, log: Path, env: Mapping[str, str]) -> RunningApp:
    """``hearth ui --port PORT ARGS`` with ``home`` as its data folder, once it says where it runs (the test fails
    with its log if it never does)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "ui", "--port", str(port), *args],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        env={**env, "HEARTH_HOME": str(home)},
    )
    app = RunningApp(f"http://127.0.0.1:{port}/", home, process, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        printed = re.search(r"Hearth is running at (\S+)", log.read_text())
        if printed:
            app.entry_url = printed.group(1)
            return app
        if process.poll() is not None:
            break
        time.sleep(0.2)
    app.stop()
    pytest.fail(f"hearth ui did not start:\n{log.read_text()}")


@pytest.fixture
def start_app(isolated_home: Path, tmp_path: Path) -> Iterator[Callable[..., RunningApp]]:
    """A `hearth ui` of the test's own, in the environment the test set, on an empty data folder unless told."""
    started: list[RunningApp] = []

    def start(*args: str, home: Path | None = None, port: int | None = None) -> RunningApp:
        """``port``: a port to listen on again (a restart: the browser keeps its storage per port)."""
        port = port or free_port()
        app = launch(args, home or isolated_home, port, tmp_path / f"ui-{port}.log", os.environ)
        started.append(app)
        return app

    yield start
    for app in started:
        app.stop()


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RunningApp]]:
    """One `hearth ui` per test module for each set of flags and settings, for the tests that neither restart nor
    kill it, set no other environment and need no empty data folder: starting one and loading its model is the
    dearest step of most page tests. Each test still opens its own browser context, so it starts on a new chat; what
    it reads from the data folder it reads against what was there before it (other tests of the module wrote there
    too)."""
    started: dict[tuple[object, ...], RunningApp] = {}
    folder = tmp_path_factory.mktemp("shared-app")
    plain = {key: value for key, value in os.environ.items() if not key.startswith("HEARTH_")}

    def shared(*args: str, settings: Mapping[str, str] | None = None) -> RunningApp:
        """``settings``: HEARTH_ variables this app starts with (the tests that share it all give the same)."""
        key = (*args, *sorted((settings or {}).items()))
        if key not in started:
            port = free_port()
            home = folder / f"home-{len(started)}"
            started[key] = launch(args, home, port, folder / f"ui-{port}.log", {**plain, **(settings or {})})
        app = started[key]
        assert app.process.poll() is None, f"the shared hearth ui ended:\n{app.log.read_text()[-3000:]}"
        return app

    yield shared
    for app in started.values():
        app.stop()


@pytest.fixture(scope="session")
def browser_session(chromium_path: Path) -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "Playwright for Python", "run `make setup`")
        raise
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    import shutil

    from tests.helpers import CHROMIUM

    require(
        CHROMIUM.exists() and shutil.which("chromedriver") is not None,
        "Debian's chromium and chromium-driver",
        "apt-get install -y chromium chromium-driver",
    )
    return CHROMIUM


@pytest.fixture
def open_page(browser_session: Any) -> Iterator[Callable[[RunningApp], Any]]:
    contexts: list[Any] = []

    def open_(app: RunningApp) -> Any:
        context = browser_session.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        local = (app.url.rstrip("/"), "data:", "blob:")
        page.on(
            "request",
            lambda request: None if request.url.startswith(local) else app.remote_requests.append(request.url),
        )
        page.on(
            "console",
            lambda message: (
                app.csp_violations.append(message.text) if "Content Security Policy" in message.text else None
            ),
        )
        page.goto(app.entry_url)
        page.wait_for_selector("#message textarea", timeout=30_000)
        return page

    yield open_
    for context in contexts:
        context.close()


@pytest.fixture
def silent_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """pip in the app is pointed at an index on this machine that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    for key in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.getsockname()[1]}/simple")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    yield
    server.close()
