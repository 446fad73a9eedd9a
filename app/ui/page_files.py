"""Gradio's temporary folder, kept inside the private data folder.

Gradio keeps each browser upload, and each file it serves, in a temporary folder: by default ``gradio`` in the
system's shared temp folder, which another account on the computer can create first (and then read or replace
what lands there). Hearth points it at a folder of its own under the data folder (owner-only, like everything
there): one per running Hearth, named by its process id, so a second Hearth on the same data never clears the
first one's uploads. Folders of Hearths that have stopped, or were killed, are removed at the next start.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from app.paths import PRIVATE_DIR_MODE
from app.services.serving.instance import process_alive

log = logging.getLogger(__name__)

GRADIO_TEMP_VARIABLE = "GRADIO_TEMP_DIR"
RUN_PREFIX = "run-"


def run_folder(base: Path, pid: int) -> Path:
    return base / f"{RUN_PREFIX}{pid}"


def use_private_page_files(base: Path) -> Path:
    """Make this process's folder under ``base`` (0700) and have Gradio keep its files there; returns it.

    Gradio reads the setting when a page is built and when the page's server is mounted, and checks uploads
    against it at each request, so it is one folder per process: a second call (a second page in the same
    process, as in tests) keeps the first folder."""
    current = os.environ.get(GRADIO_TEMP_VARIABLE)
    mine = run_folder(base, os.getpid())
    if current and Path(current).name == mine.name and Path(current).is_dir():
        return Path(current)
    base.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    base.chmod(PRIVATE_DIR_MODE)
    remove_stale_folders(base)
    mine.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
    mine.chmod(PRIVATE_DIR_MODE)
    os.environ[GRADIO_TEMP_VARIABLE] = str(mine)
    return mine


def remove_stale_folders(base: Path) -> None:
    """Remove the folders of Hearths that no longer run (stopped, killed, or from before a reboot)."""
    for entry in base.iterdir():
        number = entry.name.removeprefix(RUN_PREFIX)
        if not entry.name.startswith(RUN_PREFIX) or not number.isdigit():
            continue
        if int(number) != os.getpid() and not process_alive(int(number)):
            shutil.rmtree(entry, ignore_errors=True)
            log.debug("removed the page files of a Hearth that has stopped: %s", entry)


def remove_page_files(base: Path) -> None:
    """At a clean stop: this process's folder goes."""
    shutil.rmtree(run_folder(base, os.getpid()), ignore_errors=True)
