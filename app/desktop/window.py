"""The native window (pywebview on Qt): a splash while the server starts, then the page; the page that says the
server stopped, with Restart; brought to the front when Hearth is launched again; and on close, the server stopped.

The window's process owns the server (a :class:`ServerChild`), or, when a ``hearth ui`` was already running for
this data folder, shows that one's page and leaves it running on close. A driver thread does the waiting; the GUI
thread only draws.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from app.desktop.geometry import MIN_HEIGHT, MIN_WIDTH, WindowSize, load_size, save_size
from app.desktop.pages import exit_words, splash_page, status_script, stopped_page
from app.desktop.server import ServerChild
from app.services.serving.instance import ServerRecord, process_alive, read_record

TITLE = "Hearth"
POLL_S = 0.25
PAGE_READY_S = 120.0  # a first start imports Gradio and opens the stores: tens of seconds on a slow laptop
_KEPT: list[object] = []  # the Qt application made here, which Python must not free while pywebview uses it
# The chat is usable: its tab, its messages and the message box are on the page.
_CHAT_SHOWN = "['#chat-tab', '#chat', '#message textarea'].every(s => document.querySelector(s) !== null)"


@dataclass(frozen=True)
class WindowEvent:
    """What the window did, one JSON line each in the ``--events`` file (for scripts and tests)."""

    event: str  # "splash" | "page" | "stopped" | "restart" | "shown" | "closed"
    detail: str = ""
    pid: int = 0  # the server's


class EventLog:
    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._lock = threading.Lock()

    def write(self, event: WindowEvent) -> None:
        if self._path is None:
            return
        with self._lock, self._path.open("a") as out:
            out.write(json.dumps({**asdict(event), "time": time.time()}) + "\n")


class _Api:
    """What the window's own pages may call (``window.pywebview.api``)."""

    def __init__(self, restart: Callable[[], None]) -> None:
        self._restart = restart

    def restart(self) -> None:
        self._restart()


class DesktopWindow:
    def __init__(
        self,
        root: Path,
        ui_arguments: Sequence[str],
        events: EventLog,
        icon: Path | None,
        keep_running: bool = False,
    ) -> None:
        """``keep_running``: closing the window hides it, and Hearth goes on serving (the API, a later launch)
        until Quit in its tray icon; only where the desktop has a tray."""
        self._root = root
        self._keep_running = keep_running
        self._tray: object | None = None
        self._quitting = False
        self._ui_arguments = list(ui_arguments)
        self._events = events
        self._icon = icon
        self._size_file = root / "window.json"
        self._record_file = root / "server.json"
        self._size = load_size(self._size_file)
        self._requests: queue.Queue[str] = queue.Queue()
        self._closing = threading.Event()
        self._child: ServerChild | None = None
        self._window: Any = None

    def run(self) -> None:
        """Open the window and block until it is closed; the server it started is stopped before this returns."""
        import webview

        window = webview.create_window(
            TITLE,
            html=splash_page("Starting the server…"),
            width=self._size.width,
            height=self._size.height,
            min_size=(MIN_WIDTH, MIN_HEIGHT),
            js_api=_Api(lambda: self._requests.put("restart")),
            background_color="#fbf8f4",
        )
        if window is None:
            raise RuntimeError("pywebview made no window")
        self._window = window
        window.events.resized += self._resized
        window.events.closing += self._closing_asked
        window.events.closed += self._closed
        self._events.write(WindowEvent("splash"))
        driver = threading.Thread(target=self._drive, name="desktop-driver", daemon=True)
        gui = _name_qt_application() if sys.platform.startswith("linux") else None
        if self._keep_running:
            self._tray = self._make_tray() if gui == "qt" else None
            if self._tray is None:
                print("This desktop has no tray: closing the window will quit Hearth.", file=sys.stderr, flush=True)
        try:
            webview.start(
                driver.start,
                gui=gui,
                icon=str(self._icon) if self._icon else None,
                private_mode=False,  # the page keeps the open conversation in its storage, as a browser does
                storage_path=str(self._root / "window"),
            )
        finally:
            self._closing.set()
            self._requests.put("closing")
            driver.join(timeout=5)
            if self._child is not None:
                self._child.stop()
            save_size(self._size_file, self._size)
            self._events.write(WindowEvent("closed"))

    def bring_to_front(self) -> None:
        """Called for a second launch: show the window again if hidden or minimized, and raise it."""
        window = self._window
        if window is None:
            return
        window.show()
        window.restore()  # un-minimizes it, raises it and gives it the focus (Qt)
        self._events.write(WindowEvent("shown"))

    def quit(self) -> None:
        """Close the window for good (the tray's Quit): the server stops with it."""
        self._quitting = True
        if self._window is not None:
            self._window.destroy()

    def _make_tray(self) -> object | None:
        from app.desktop.tray import make_tray

        return make_tray(self._icon, "Hearth: running in the background", self.bring_to_front, self.quit)

    def _closing_asked(self) -> bool:
        """False (the window stays, hidden) when Hearth keeps running in the tray; True lets it close."""
        if self._tray is None or self._quitting:
            return True
        self._window.hide()
        self._events.write(WindowEvent("hidden"))
        return False

    def _resized(self, width: int, height: int) -> None:
        self._size = WindowSize(max(width, MIN_WIDTH), max(height, MIN_HEIGHT))

    def _closed(self) -> None:
        self._closing.set()
        self._requests.put("closing")

    def _drive(self) -> None:
        """Bring the server up, show its page, and watch it until the window closes."""
        while not self._closing.is_set():
            running = self._bring_up()
            if running is not None:
                self._watch(running)
            if not self._await_restart():
                return

    def _bring_up(self) -> ServerRecord | None:
        """The page of a ``hearth ui`` already running for this data folder, or of one started now; None (and the
        stopped page shown) if the one started ends before it listens."""
        existing = read_record(self._record_file)
        if existing is not None and (self._child is None or existing.pid != self._child.pid):
            self._open_page(existing)
            return existing
        self._child = ServerChild(self._ui_arguments, self._record_file)
        shown = 0
        deadline = time.monotonic() + PAGE_READY_S
        while not self._closing.is_set():
            record = self._child.record()
            if record is not None:
                self._open_page(record)
                return record
            code = self._child.exit_code()
            if code is not None:
                self._show_stopped(exit_words(code), self._child.pid)
                return None
            printed, lines = self._child.lines()
            if printed != shown and lines:
                shown = printed
                self._window.evaluate_js(status_script(lines[-1]))
            if time.monotonic() > deadline:
                self._child.stop()
                self._show_stopped(f"The Hearth server did not start within {PAGE_READY_S:.0f} seconds.", 0)
                return None
            time.sleep(POLL_S)
        return None

    def _open_page(self, record: ServerRecord) -> None:
        self._window.load_url(record.entry_url)
        deadline = time.monotonic() + PAGE_READY_S
        while not self._closing.is_set() and time.monotonic() < deadline:
            if self._window.evaluate_js(_CHAT_SHOWN) is True:
                self._events.write(WindowEvent("page", record.url, record.pid))
                return
            time.sleep(POLL_S * 2)

    def _watch(self, record: ServerRecord) -> None:
        """Until the window closes or a restart is asked for; the stopped page if the server ends meanwhile."""
        while not self._closing.is_set():
            try:
                request = self._requests.get(timeout=POLL_S)
            except queue.Empty:
                request = ""
            if request:
                self._requests.put(request)  # for _await_restart
                return
            ours = self._child is not None and self._child.pid == record.pid
            code = self._child.exit_code() if ours and self._child is not None else None
            if code is not None:
                self._show_stopped(exit_words(code), record.pid)
                return
            if not ours and not process_alive(record.pid):
                self._show_stopped("The Hearth server this window showed has stopped.", record.pid)
                return

    def _await_restart(self) -> bool:
        """Block until Restart is pressed (True) or the window closes (False); the old server is stopped first."""
        while True:
            request = self._requests.get()
            if request == "closing" or self._closing.is_set():
                return False
            if request == "restart":
                self._events.write(WindowEvent("restart"))
                if self._child is not None:
                    self._child.stop()
                self._window.load_html(splash_page("Starting the server again…"))
                return True

    def _show_stopped(self, what: str, pid: int) -> None:
        lines = self._child.lines()[1] if self._child is not None else []
        self._window.load_html(stopped_page(what, lines))
        self._events.write(WindowEvent("stopped", what, pid))


def _name_qt_application() -> Literal["qt"]:
    """Make the Qt application pywebview will use, named so that desktops match the window to Hearth's menu entry
    (X11 ``WM_CLASS`` "hearth", "Hearth"; Wayland app id "hearth"); the name of the GUI pywebview should use."""
    from qtpy import QtWebEngineWidgets  # noqa: F401  (must be loaded before the application exists)
    from qtpy.QtGui import QGuiApplication
    from qtpy.QtWidgets import QApplication

    if QApplication.instance() is None:
        _KEPT.append(QApplication(["hearth"]))  # pywebview finds it through instance()
    QGuiApplication.setApplicationName("Hearth")
    QGuiApplication.setDesktopFileName("hearth")
    return "qt"
