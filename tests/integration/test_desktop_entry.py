"""`make install-desktop` / `make uninstall-desktop`: a valid freedesktop entry and icon for the current user, in
XDG_DATA_HOME only, that starts this checkout's `hearth desktop`; removed again without a trace of Hearth."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import require

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "packaging" / "desktop-entry.sh"


def _run(action: str, data: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), action],
        env={**os.environ, "XDG_DATA_HOME": str(data), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_entry_is_valid_starts_the_desktop_window_and_is_removed_again(tmp_path: Path) -> None:
    require(
        shutil.which("desktop-file-validate") is not None, "desktop-file-validate", "apt-get install desktop-file-utils"
    )
    data = tmp_path / "share"
    installed = _run("install", data)
    assert installed.returncode == 0, installed.stderr
    entry = data / "applications" / "hearth.desktop"
    icon = data / "icons" / "hicolor" / "512x512" / "apps" / "hearth.png"
    assert icon.read_bytes() == (ROOT / "app" / "desktop" / "hearth.png").read_bytes()
    validated = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True, text=True, check=False)
    assert validated.returncode == 0 and validated.stdout == "", validated.stdout + validated.stderr
    fields = dict(line.split("=", 1) for line in entry.read_text().splitlines() if "=" in line)
    assert fields["Exec"] == f'"{ROOT / ".venv" / "bin" / "hearth"}" desktop'
    assert Path(fields["TryExec"]).is_file()
    assert fields["StartupWMClass"] == "Hearth"  # the class the window's Qt application sets
    assert fields["Icon"] == "hearth"

    removed = _run("uninstall", data)
    assert removed.returncode == 0, removed.stderr
    assert not entry.exists() and not icon.exists()


@pytest.mark.parametrize("executable", ["/nowhere/hearth", '/tmp/we"ird/hearth'])
def test_an_unusable_executable_is_refused_with_what_to_do(tmp_path: Path, executable: str) -> None:
    if '"' in executable:
        weird = tmp_path / 'we"ird'
        weird.mkdir()
        (weird / "hearth").write_text("#!/bin/sh\n")
        (weird / "hearth").chmod(0o755)
        executable = str(weird / "hearth")
    refused = _run("install", tmp_path / "share", HEARTH_EXECUTABLE=executable)
    assert refused.returncode == 1
    assert "error:" in refused.stderr and ("make setup" in refused.stderr or "move the checkout" in refused.stderr)
    assert not (tmp_path / "share" / "applications" / "hearth.desktop").exists()
