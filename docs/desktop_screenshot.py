"""Take the README's picture of the desktop window: a real `hearth desktop` on a private X server (Xvfb with
Openbox), a question typed into its message box, the screen grabbed once the answer has ended.

    HEARTH_HOME=/tmp/shot-home .venv/bin/python docs/desktop_screenshot.py --question "…" --out docs/desktop-window.png

Needs Xvfb, openbox and xdotool (Debian packages of those names). The data folder's default model answers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRAB = """
import sys
from PyQt6.QtWidgets import QApplication
app = QApplication(sys.argv)
sys.exit(0 if app.primaryScreen().grabWindow(0).save(sys.argv[1], "PNG") else 1)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--question", required=True)
    parser.add_argument("--answer-seconds", type=float, default=60.0, help="how long the answer may take")
    parser.add_argument("--settle-seconds", type=float, default=20.0, help="wait for the model to load first")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    read, write = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x860x24", "-nolisten", "tcp"], pass_fds=(write,)
    )
    os.close(write)
    with os.fdopen(read) as told:
        display = f":{told.readline().strip()}"
    env = {**os.environ, "DISPLAY": display}
    manager = subprocess.Popen(["openbox"], env=env, stderr=subprocess.DEVNULL)
    events = Path(tempfile.mkdtemp()) / "events.jsonl"
    desktop = subprocess.Popen([sys.executable, "-m", "app", "desktop", "--events", str(events)], env=env)
    try:
        deadline = time.monotonic() + 180
        while not (events.exists() and '"page"' in events.read_text()):
            if time.monotonic() > deadline or desktop.poll() is not None:
                raise SystemExit("the window did not show the chat")
            time.sleep(0.5)
        time.sleep(args.settle_seconds)
        window = subprocess.run(
            ["xdotool", "search", "--name", "^Hearth$"], env=env, capture_output=True, text=True, check=True
        ).stdout.split()[0]
        subprocess.run(["xdotool", "windowsize", window, "1240", "820"], env=env, check=True)
        subprocess.run(["xdotool", "windowmove", window, "20", "10"], env=env, check=True)
        subprocess.run(["xdotool", "windowactivate", "--sync", window], env=env, check=True)
        time.sleep(2)
        subprocess.run(["xdotool", "type", "--delay", "20", args.question], env=env, check=True)
        subprocess.run(["xdotool", "key", "Return"], env=env, check=True)
        time.sleep(args.answer_seconds)
        subprocess.run([sys.executable, "-c", GRAB, str(args.out)], env=env, check=True)
        print(json.dumps({"screenshot": str(args.out)}))
    finally:
        subprocess.run(["wmctrl", "-c", "Hearth"], env=env, check=False)
        desktop.wait(timeout=60)
        manager.terminate()
        xvfb.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
