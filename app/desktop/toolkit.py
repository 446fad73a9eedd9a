"""Whether a native window can open here: a display, pywebview, and a Qt with its web engine that starts.

Qt ends the process (it does not raise) when its platform plugin cannot load, for instance when a system library
such as ``libxcb-cursor0`` is missing; so the check starts Qt in a short-lived child process and reads what it said.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

PROBE_TIMEOUT_S = 30.0
_PROBE = (
    "import webview\nfrom qtpy.QtWidgets import QApplication\nfrom qtpy import QtWebEngineWidgets\nQApplication([])\n"
)


@dataclass(frozen=True)
class NoWindow:
    """Why no native window can open here, and what would make one possible."""

    reason: str
    remedy: str


def web_engine_environment() -> dict[str, str]:
    """What Qt's web engine needs in its environment here: Chromium refuses to start its sandbox as root, so a
    window run by root (containers, CI) runs it without (the window only shows Hearth's own local page)."""
    env = {"QT_API": "pyqt6"}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["QTWEBENGINE_DISABLE_SANDBOX"] = "1"
    return env


def check_toolkit() -> NoWindow | None:
    """None when a window can open; else why not."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return NoWindow(
            "There is no desktop display here (neither DISPLAY nor WAYLAND_DISPLAY is set).",
            "Run it from your desktop session, or use `hearth ui --open` and a browser.",
        )
    try:
        probe = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env={**os.environ, **web_engine_environment()},
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return NoWindow("The window toolkit (Qt) did not start within 30 seconds.", "Try again, or use a browser.")
    if probe.returncode == 0:
        return None
    said = [line.strip() for line in probe.stderr.splitlines() if line.strip()]
    if any("No module named" in line for line in said):
        missing = next(line for line in said if "No module named" in line).split("No module named", 1)[1].strip(" '")
        return NoWindow(
            f"The window toolkit is not installed ({missing} is missing).",
            "Run `make setup` in the Hearth folder (it installs pywebview and Qt).",
        )
    needed = [line for line in said if "is needed" in line or "cannot open shared object" in line]
    told = needed[0] if needed else (said[-1] if said else "no reason given")
    return NoWindow(
        f"The window toolkit (Qt) could not start: {told}",
        "Install the system libraries it names (on Debian or Ubuntu: "
        "`sudo apt install libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1`).",
    )
