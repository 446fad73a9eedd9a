"""The Hearth server the window shows: ``hearth ui`` in a child process of the window, in a session of its own
(so the engine and the workers it starts go with it), followed until it says where it listens.

The child writes the server record (``server.json``) once it listens; the window waits for a record with the
child's pid. Everything the child prints is kept (the last lines), for the splash and for the page that says why
it stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from app.services.serving.instance import ServerRecord, read_record

# The child follows its parent: Linux ends it (SIGTERM, a clean stop) when the window's process dies.
PARENT_ENV = "HEARTH_DESKTOP_PARENT"
KEPT_LINES = 40
STOP_WAIT_S = 20.0


class ServerChild:
    """One ``hearth ui`` started by the window. :meth:`record` is its server record once it listens."""

    def __init__(self, ui_arguments: Sequence[str], record_path: Path) -> None:
        self._record_path = record_path
        self._lines: deque[str] = deque(maxlen=KEPT_LINES)
        self._lines_lock = threading.Lock()
        self._printed = 0  # lines printed so far, kept or not
        env = {**os.environ, PARENT_ENV: str(os.getpid()), "PYTHONUNBUFFERED": "1"}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "app", "ui", *ui_arguments],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            text=True,
            errors="replace",
        )
        self._reader = threading.Thread(target=self._read, name="desktop-server-output", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._process.pid

    def _read(self) -> None:
        stream = self._process.stdout
        if stream is None:
            return
        for line in stream:
            line = line.rstrip()
            if line:
                with self._lines_lock:
                    self._lines.append(line)
                    self._printed += 1

    def lines(self) -> tuple[int, list[str]]:
        """How many lines the child has printed, and the last :data:`KEPT_LINES` of them."""
        with self._lines_lock:
            return self._printed, list(self._lines)

    def record(self) -> ServerRecord | None:
        """Where the child listens, once it does."""
        record = read_record(self._record_path)
        return record if record is not None and record.pid == self._process.pid else None

    def exit_code(self) -> int | None:
        """The child's exit status once it has ended (negative: the signal that ended it), else None."""
        code = self._process.poll()
        if code is not None:
            self._reader.join(timeout=2)  # its last words, before anyone reads them
        return code

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """Stop the child as Ctrl+C would (it stops its engine and removes its record), then anything it left
        in its session; killed if it does not end in ``wait_s``."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)  # a worker it started and did not stop
        self._reader.join(timeout=2)


def follow_parent() -> None:
    """In a server started by the window: end (SIGTERM) when the window's process dies, however it dies. Linux
    only; elsewhere the window stops the server when it closes, and a killed window leaves it running."""
    from backends.parent_death import end_with_parent

    parent = os.environ.get(PARENT_ENV)
    if parent and parent.isdigit():
        end_with_parent(signal.SIGTERM, int(parent))
