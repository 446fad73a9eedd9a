"""A full disk is reported as a full disk, with what to free, never as a damaged store: the data folder on a small
tmpfs that the test mounts and fills, real `hearth ingest` runs (Chroma, SQLite, MiniLM)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import require

pytestmark = pytest.mark.integration

WORDS = ["lighthouse", "harbour", "keeper", "lamp", "oil", "storm", "ship", "tide", "rock", "bell", "chandlery", "quay"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    require(os.geteuid() == 0 and shutil.which("mount") is not None, "root and mount", "run the suite as root")
    mountpoint = tmp_path / "small-disk"
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", str(mountpoint)], check=True)
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def fill(disk: Path) -> Path:
    """Write a ballast file until the disk has no space left."""
    ballast = disk / "ballast"
    descriptor = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 512):  # then the last bytes a partial block leaves
            try:
                while True:
                    os.write(descriptor, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(descriptor)
    assert shutil.disk_usage(disk).free < 64 << 10
    return ballast


def ingest(home: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"HEARTH_HOME": str(home)}
    command = [sys.executable, "-m", "app", "ingest", *map(str, paths), "--collection", "notes"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def document(path: Path, seed: int) -> Path:
    path.write_text(" ".join(WORDS[(seed * 7 + i * i) % len(WORDS)] for i in range(1500)))
    return path


def test_a_full_disk_says_so_and_what_to_free_and_the_store_stays_sound(small_disk: Path, tmp_path: Path) -> None:
    home = small_disk / "hearth"
    first = ingest(home, document(tmp_path / "first.txt", 1))
    assert first.returncode == 0, first.stderr

    ballast = fill(small_disk)
    full = ingest(home, document(tmp_path / "second.txt", 2), document(tmp_path / "third.txt", 3))
    said = full.stdout + full.stderr
    assert "is full" in said and "Free some space" in said, said[-2000:]
    assert "is damaged" not in said and "hearth repair" not in said and "Traceback" not in said

    ballast.unlink()
    again = ingest(home, tmp_path / "second.txt", tmp_path / "third.txt")
    assert again.returncode == 0, again.stderr
    env = os.environ | {"HEARTH_HOME": str(home)}
    check = subprocess.run(
        [sys.executable, "-m", "app", "repair", "--check"], capture_output=True, text=True, env=env, timeout=300
    )
    assert check.returncode == 0 and "Every store is sound." in check.stdout, check.stdout + check.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "app", "collections", "notes"], capture_output=True, text=True, env=env, timeout=300
    )
    assert all(name in listed.stdout for name in ("first.txt", "second.txt", "third.txt")), listed.stdout
