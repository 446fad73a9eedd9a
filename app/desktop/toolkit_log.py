"""What Qt and its web engine (Chromium) print — a missing Vulkan library, no system bus, "Sandboxing disabled",
pages "still not deleted" at exit — goes to ``logs/desktop.log`` in the data folder, not to the terminal that
started the window: none of it is for the person using Hearth, and all of it is for a bug report. ``hearth -v
desktop`` leaves it on the terminal.

Those lines are written by C++ code, and by the web engine's helper processes, straight to file descriptor 2; so
descriptor 2 itself is pointed at the log (the helpers inherit it), while Python's ``sys.stderr`` — where Hearth's
own words go — is moved to a copy of the terminal's descriptor. The file is owner-only, in the owner-only data
folder; one earlier file is kept beside it once it passes ``MAX_BYTES``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from app.paths import PRIVATE_DIR_MODE

LOG_NAME = "desktop.log"
MAX_BYTES = 2 * 1024 * 1024
PRIVATE_FILE_MODE = 0o600


def rotate(path: Path, max_bytes: int = MAX_BYTES) -> None:
    """Keep one earlier file (``NAME.1``) once ``path`` has grown past ``max_bytes``."""
    try:
        if path.stat().st_size > max_bytes:
            path.replace(path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass


def send_toolkit_output_to_log(logs_dir: Path) -> Path | None:
    """Point descriptor 2 at ``logs_dir/desktop.log`` and keep ``sys.stderr`` (and the log handlers writing to it)
    on the terminal. The log's path; None where it cannot be opened (the lines then stay on the terminal)."""
    path = logs_dir / LOG_NAME
    try:
        logs_dir.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        rotate(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        log_fd = os.open(path, flags, PRIVATE_FILE_MODE)
    except OSError:
        return None
    try:
        os.fchmod(log_fd, PRIVATE_FILE_MODE)  # a file made by an older Hearth, or by hand, is made owner-only too
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.write(log_fd, f"--- hearth desktop started {stamp} (process {os.getpid()})\n".encode())
        sys.stderr.flush()
        terminal_fd = os.dup(2)  # not inherited: the web engine's helpers write to the log only
        os.dup2(log_fd, 2)
    finally:
        os.close(log_fd)
    old = sys.stderr
    terminal = os.fdopen(terminal_fd, "w", buffering=1, encoding=old.encoding or "utf-8", errors="backslashreplace")
    sys.stderr = terminal
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is old:
            handler.setStream(terminal)
    return path
