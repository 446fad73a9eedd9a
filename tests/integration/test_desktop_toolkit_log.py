"""Qt's and Chromium's lines reach ``logs/desktop.log``, not the terminal, in a real process: what C++ code and the
web engine's helper processes write to descriptor 2 goes to the log; Hearth's own words (``sys.stderr``, its log
handler) stay on the terminal; the file is owner-only, another account (``setpriv``) cannot read it, and one
earlier file is kept once it grows past its size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.desktop.toolkit_log import LOG_NAME, rotate
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration

PROCESS = """
import logging, os, subprocess, sys
from pathlib import Path
from app.desktop.toolkit_log import send_toolkit_output_to_log
logging.basicConfig(handlers=[logging.StreamHandler()])
path = send_toolkit_output_to_log(Path(sys.argv[1]))
print("LOG", path, flush=True)
os.write(2, b"Failed to load vulkan (as Qt writes it)\\n")
subprocess.run(["sh", "-c", "echo 'ERROR:bus.cc Failed to connect to the bus (a helper process)' >&2"], check=True)
print("Hearth's own words", file=sys.stderr)
logging.getLogger("hearth").warning("a warning of Hearth's")
"""


def run_window_like(logs: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROCESS, str(logs)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_the_toolkits_lines_go_to_the_log_and_hearths_own_stay_on_the_terminal(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    done = run_window_like(logs)
    assert done.returncode == 0, done.stderr
    log = logs / LOG_NAME
    assert done.stdout.strip() == f"LOG {log}"
    assert "Hearth's own words" in done.stderr and "a warning of Hearth's" in done.stderr
    assert "vulkan" not in done.stderr and "bus.cc" not in done.stderr, done.stderr
    written = log.read_text()
    assert written.startswith("--- hearth desktop started ")
    assert "Failed to load vulkan" in written and "Failed to connect to the bus (a helper process)" in written
    assert "Hearth's own words" not in written
    assert log.stat().st_mode & 0o777 == 0o600 and logs.stat().st_mode & 0o777 == 0o700

    again = run_window_like(logs)  # a second start adds to the same file
    assert again.returncode == 0, again.stderr
    assert log.read_text().count("--- hearth desktop started ") == 2


def test_an_unwritable_log_leaves_the_lines_on_the_terminal(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / LOG_NAME).mkdir()  # not a file: it cannot be opened
    done = run_window_like(logs)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "LOG None"
    assert "Failed to load vulkan" in done.stderr and "Hearth's own words" in done.stderr


def test_one_earlier_file_is_kept_once_it_grows(tmp_path: Path) -> None:
    log = tmp_path / LOG_NAME
    log.write_text("x" * 100)
    rotate(log, max_bytes=200)
    assert log.exists()
    rotate(log, max_bytes=50)
    assert not log.exists() and (tmp_path / f"{LOG_NAME}.1").read_text() == "x" * 100
    rotate(log, max_bytes=50)  # nothing to rotate: no error


def test_another_account_cannot_read_the_log(other_account: tuple[int, int], open_folder: Path) -> None:
    """Even inside folders others may enter (the data folder is 0700 in use), the file is the owner's alone: the
    other account reaches the folder and is refused the file."""
    logs = open_folder / "logs"
    logs.mkdir()
    logs.chmod(0o755)
    assert run_window_like(logs).returncode == 0
    listed = as_other(other_account, "/bin/ls", str(logs))
    assert listed.returncode == 0 and LOG_NAME in listed.stdout, listed.stderr
    tried = as_other(other_account, "/bin/cat", str(logs / LOG_NAME))
    assert tried.returncode != 0 and "Permission denied" in tried.stderr, tried.stdout + tried.stderr
    assert "vulkan" not in tried.stdout
