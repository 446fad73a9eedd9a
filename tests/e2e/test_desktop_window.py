"""`hearth desktop` as a person uses it: a real Qt window (pywebview) on a real X server (Xvfb) with a real window
manager (Openbox), showing the real page of a real `hearth ui` child with the embedded model.

Seen through the X server (wmctrl, xprop, xdotool) and the window's own ``--events`` file, never through Hearth's
internals: the window shows the chat; a second launch un-minimizes and activates it; a server killed under it gives
the page that says so, and Enter on its Restart button brings the chat back; closing the window ends every process
it started, and Qt's own lines went to the data folder's log, not the terminal; kept running, closing hides it
behind a tray icon whose Quit ends it; without a display it says so and opens the browser instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.e2e.conftest import free_port
from tests.helpers import require

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
START_S = 150.0  # a first start under a busy suite: Qt's web engine, Gradio, the stores, the engine
TRAY_ICON = re.compile(r'\("hearth" "Hearth"\)\s+(\d+)x(\d+)\+-?\d+\+-?\d+\s+\+(-?\d+)\+(-?\d+)')
GRAB = """
import sys
from PyQt6.QtWidgets import QApplication
app = QApplication(sys.argv)
sys.exit(0 if app.primaryScreen().grabWindow(0).save(sys.argv[1], "PNG") else 1)
"""


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    """A private X server with a window manager, as a desktop session has."""
    tools = [
        ("Xvfb", "xvfb"),
        ("openbox", "openbox"),
        ("trayer", "trayer"),
        ("wmctrl", "wmctrl"),
        ("xdotool", "xdotool"),
    ]
    for tool, package in tools:
        require(shutil.which(tool) is not None, tool, f"apt-get install {package}")
    read, write = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x900x24", "-nolisten", "tcp"],
        pass_fds=(write,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as told:
        number = told.readline().strip()
    name = f":{number}"
    manager = subprocess.Popen(
        ["openbox"], env={**os.environ, "DISPLAY": name}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    tray: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(lambda: _x(name, "wmctrl", "-m").returncode == 0, 20, "the window manager to start")
        tray = _start_tray(name)
        yield name
    finally:
        if tray is not None:
            tray.terminate()
            tray.wait(timeout=10)
        manager.terminate()
        xvfb.terminate()
        manager.wait(timeout=10)
        xvfb.wait(timeout=10)


def _start_tray(display: str, tries: int = 3) -> subprocess.Popen[bytes]:
    """A panel with a system tray (XEmbed), for the tray icon of a Hearth kept running in the background. Seen
    once on a busy machine: trayer ended without showing its panel; it is started again then."""
    for _ in range(tries):
        tray = subprocess.Popen(
            ["trayer", "--edge", "top", "--align", "right", "--widthtype", "request", "--height", "24"],
            env={**os.environ, "DISPLAY": display},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and tray.poll() is None:
            if '("panel" "trayer")' in _x(display, "xwininfo", "-root", "-tree").stdout:
                return tray
            time.sleep(0.3)
        tray.terminate()
        tray.wait(timeout=10)
    raise AssertionError(f"the tray did not start in {tries} tries")


def _running_children(pid: int) -> list[psutil.Process]:
    """Every process under ``pid`` now, leaving out any that ended and wait for their parent to reap them (asking
    a zombie for its children or command line raises)."""
    for _ in range(20):
        try:
            children = psutil.Process(pid).children(recursive=True)
            return [p for p in children if p.status() != psutil.STATUS_ZOMBIE]
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            time.sleep(0.25)
    raise AssertionError(f"could not list the processes under {pid}")


def _still_running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Desktop:
    """One `hearth desktop` launch and what it has said in its events file."""

    def __init__(self, display: str, home: Path, events: Path, port: int, *flags: str) -> None:
        self.display = display
        self.home = home
        self.events_file = events
        self.port = port
        self.log = events.with_suffix(".log")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "desktop", "--port", str(port), "--events", str(events), *flags],
            env=_env(display, home),
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )

    def events(self) -> list[dict[str, Any]]:
        if not self.events_file.exists():
            return []
        return [json.loads(line) for line in self.events_file.read_text().splitlines() if line.strip()]

    def wait_for_event(self, kind: str, count: int = 1, timeout: float = START_S) -> dict[str, Any]:
        def seen() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"hearth desktop ended ({self.process.returncode}):\n{self.log.read_text()}")
            return len([e for e in self.events() if e["event"] == kind]) >= count

        _wait_for(seen, timeout, f"the window's event {kind!r} (#{count})", self.log)
        return [e for e in self.events() if e["event"] == kind][count - 1]

    def window_id(self) -> str:
        listed = _x(self.display, "wmctrl", "-l").stdout.splitlines()
        ids = [line.split()[0] for line in listed if line.split()[3:] == ["Hearth"]]
        assert len(ids) == 1, listed
        return ids[0]

    def close(self) -> None:
        if self.process.poll() is None:
            _x(self.display, "wmctrl", "-c", "Hearth")
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def launch(display: str, isolated_home: Path, embedded_model: Path, tmp_path: Path) -> Iterator[Callable[..., Desktop]]:
    started: list[Desktop] = []

    def start(*flags: str) -> Desktop:
        desktop = Desktop(display, isolated_home, tmp_path / f"events-{len(started)}.jsonl", free_port(), *flags)
        started.append(desktop)
        return desktop

    yield start
    for desktop in started:
        desktop.close()


def test_the_window_shows_the_chat_comes_to_the_front_on_a_second_launch_and_closing_ends_every_process(
    launch: Callable[[], Desktop], display: str, isolated_home: Path
) -> None:
    desktop = launch()
    page = desktop.wait_for_event("page")
    assert page["detail"] == f"http://127.0.0.1:{desktop.port}/"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "desktop-window.png"
    grab = subprocess.run([sys.executable, "-c", GRAB, str(shot)], env=_env(display, isolated_home), check=False)
    assert grab.returncode == 0 and shot.stat().st_size > 10_000  # the page, not a blank screen (looked at too)

    window = desktop.window_id()

    def minimized() -> bool:
        # the window manager may set the hidden state after the unmap, or miss a request on a busy machine: ask again
        _x(display, "xdotool", "windowminimize", window)
        return "_NET_WM_STATE_HIDDEN" in _x(display, "xprop", "-id", window, "_NET_WM_STATE").stdout

    _wait_for(minimized, 10, "the window to be minimized")

    second = subprocess.run(
        [sys.executable, "-m", "app", "desktop", "--port", str(free_port())],
        env=_env(display, isolated_home),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 0, second.stderr
    assert "already open" in second.stdout
    desktop.wait_for_event("shown", timeout=10)
    _wait_for(
        lambda: "_NET_WM_STATE_HIDDEN" not in _x(display, "xprop", "-id", window, "_NET_WM_STATE").stdout,
        10,
        "the window to be shown again",
    )
    _wait_for(
        lambda: _x(display, "xprop", "-root", "_NET_ACTIVE_WINDOW").stdout.split()[-1] == hex(int(window, 16)),
        10,
        "the window to be the active one",
    )
    assert desktop.window_id() == window  # one Hearth window, the same

    started = _running_children(desktop.process.pid)
    names = " ".join(" ".join(p.cmdline()) for p in started)
    assert "app ui" in names and "backends.engine" in names  # the server and its engine, to be ended below
    desktop.close()
    assert desktop.process.returncode == 0, desktop.log.read_text()
    _wait_for(lambda: not any(_still_running(p) for p in started), 20, "every process to end")
    assert not (isolated_home / "server.json").exists()
    remembered = json.loads((isolated_home / "window.json").read_text())
    assert remembered["width"] > 0 and remembered["height"] > 0
    assert [e["event"] for e in desktop.events()][-1] == "closed"
    # Qt's and Chromium's lines (no Vulkan here, no system bus, the sandbox off as root) are in the data folder's
    # log, not on the terminal that launched the window.
    terminal = desktop.log.read_text()
    assert not re.search(r"vulkan|bus\.cc|sandbox|WebEnginePage|Registered new object", terminal, re.I), terminal
    toolkit_log = isolated_home / "logs" / "desktop.log"
    assert toolkit_log.read_text().startswith("--- hearth desktop started ")
    assert toolkit_log.stat().st_mode & 0o777 == 0o600


def test_a_server_that_dies_under_the_window_is_reported_and_restart_brings_the_chat_back(
    launch: Callable[[], Desktop], display: str
) -> None:
    desktop = launch()
    first = desktop.wait_for_event("page")
    psutil.Process(first["pid"]).kill()
    stopped = desktop.wait_for_event("stopped", timeout=30)
    assert stopped["detail"] == "The Hearth server was ended by SIGKILL."
    window = desktop.window_id()

    def restarted() -> bool:
        # The Restart button has the focus once the page is drawn; a key sent while it is still being drawn (seen
        # once in a run of the whole module) is pressed again, as a person would.
        _x(display, "xdotool", "windowactivate", "--sync", window)
        _x(display, "xdotool", "windowfocus", "--sync", window)
        _x(display, "xdotool", "key", "Return")
        deadline = time.monotonic() + 7
        while time.monotonic() < deadline:
            if any(e["event"] == "restart" for e in desktop.events()):
                return True
            time.sleep(0.25)
        return False

    _wait_for(restarted, 21, "the window's event 'restart' after Enter on Restart", desktop.log)
    again = desktop.wait_for_event("page", count=2)
    assert again["pid"] != first["pid"]
    assert psutil.pid_exists(again["pid"])


def test_kept_running_closing_hides_the_window_the_server_goes_on_and_quit_in_the_tray_ends_it(
    launch: Callable[..., Desktop], display: str, isolated_home: Path
) -> None:
    desktop = launch("--keep-running")
    page = desktop.wait_for_event("page")
    _x(display, "wmctrl", "-c", "Hearth")
    desktop.wait_for_event("hidden", timeout=20)
    assert "Hearth" not in _x(display, "wmctrl", "-l").stdout  # hidden, not closed
    assert desktop.process.poll() is None and psutil.pid_exists(page["pid"])
    key = (isolated_home / "api-key").read_text().strip()
    asked = urllib.request.Request(
        f"http://127.0.0.1:{desktop.port}/v1/models", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(asked, timeout=10) as reply:  # the API still answers
        assert reply.status == 200

    reopened = subprocess.run(
        [sys.executable, "-m", "app", "desktop"], env=_env(display, isolated_home), capture_output=True, timeout=60
    )
    assert reopened.returncode == 0
    desktop.wait_for_event("shown", timeout=10)
    _wait_for(lambda: "Hearth" in _x(display, "wmctrl", "-l").stdout, 10, "the window to come back")

    x, y = _tray_icon_centre(display)
    _x(display, "xdotool", "mousemove", str(x), str(y), "click", "3")  # the tray icon's menu
    time.sleep(1)
    _x(display, "xdotool", "key", "Up", "Return")  # its last item: Quit Hearth
    desktop.process.wait(timeout=60)
    assert desktop.process.returncode == 0
    _wait_for(lambda: not psutil.pid_exists(page["pid"]), 20, "the server to end")
    assert [e["event"] for e in desktop.events()][-1] == "closed"


def _tray_icon_centre(display: str) -> tuple[int, int]:
    """Where Hearth's icon sits in the tray: the small window of class Hearth that trayer's panel holds."""
    tree = _x(display, "xwininfo", "-root", "-tree").stdout
    for width, height, left, top in TRAY_ICON.findall(tree):
        if int(width) <= 64 and int(height) <= 64:
            return int(left) + int(width) // 2, int(top) + int(height) // 2
    raise AssertionError(f"no Hearth icon in the tray:\n{tree}")


def test_without_a_display_it_says_so_and_opens_the_page_in_the_browser(
    isolated_home: Path, embedded_model: Path, tmp_path: Path
) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" >> {opened}\n')
    browser.chmod(0o700)
    env = {k: v for k, v in _env("", isolated_home).items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["BROWSER"] = str(browser)
    log = tmp_path / "desktop.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "desktop", "--port", str(free_port())],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for(
            lambda: opened.exists() and opened.read_text().strip() != "", START_S, "the browser to be opened", log
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
    said = log.read_text()
    assert "There is no desktop display here" in said
    assert "Opening Hearth in your web browser instead." in said
    assert opened.read_text().startswith(("http://127.0.0.1:", "file://"))


def _env(display: str, home: Path) -> dict[str, str]:
    return {**os.environ, "DISPLAY": display, "HEARTH_HOME": str(home)}


def _x(display: str, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, env={**os.environ, "DISPLAY": display}, capture_output=True, text=True, timeout=30, check=False
    )


def _wait_for(check: Callable[[], bool], timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    told = f"\n{log.read_text()[-3000:]}" if log is not None and log.exists() else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{told}")
