"""llama.cpp's own messages (its warnings about a model file, its errors on a failed load) go to
``logs/llama.cpp.log`` in the data folder, not to the terminal: Hearth says in its own words what went wrong, and
the library's lines are there for a bug report. ``-v`` prints them on the terminal as before.

The file is opened at the first message (a command that never loads a model makes none), owner-only like the rest
of the data folder, and kept small: at most two files of ``MAX_BYTES``.
"""

from __future__ import annotations

import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path

from app.paths import PRIVATE_DIR_MODE, ensure_data_dir, resolve_data_paths
from models.shared.errors import HearthError

LIBRARIES = ("llama.cpp",)
LOG_NAME = "llama.cpp.log"
MAX_BYTES = 2 * 1024 * 1024
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LibraryLog(logging.Handler):
    """Writes the libraries' records to their log file in the data folder of ``home`` (the default when None)."""

    def __init__(self, home: Path | None) -> None:
        super().__init__()
        self._home = home
        self._file: logging.Handler | None = None
        self._unwritable = False

    def emit(self, record: logging.LogRecord) -> None:
        target = self._target()
        if target is not None:
            target.handle(record)

    def _target(self) -> logging.Handler | None:
        if self._file is None and not self._unwritable:
            try:
                folder = ensure_data_dir(resolve_data_paths(self._home)).logs_dir
                folder.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
                handler = RotatingFileHandler(folder / LOG_NAME, maxBytes=MAX_BYTES, backupCount=1, encoding="utf-8")
            except (HearthError, OSError):
                self._unwritable = True  # Hearth reports an unusable data folder itself; the lines are dropped
                return None
            handler.setFormatter(logging.Formatter(FORMAT))
            self._file = handler
        return self._file

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        super().close()


def keep_library_logs_off_the_terminal() -> None:
    """Send the libraries' log records to the data folder's log file instead of the terminal."""
    home = os.environ.get("HEARTH_HOME")
    handler = LibraryLog(Path(home) if home else None)
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        logger.propagate = False
        logger.addHandler(handler)
