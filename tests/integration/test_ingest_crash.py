"""A real `hearth ingest` killed with SIGKILL in the middle, then run again: nothing missing, nothing twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.library.documents import build_documents
from app.settings import load_settings

pytestmark = pytest.mark.integration

FILES = 12  # the kill comes after 5 are indexed: 7 left to resume
# Enough passages a file (about 25) that the files after the first take seconds, not the 15 ms a file that five
# passages took: a Ctrl+C sent when the first is reported must still find work left to stop.
LINES = 200


def write_corpus(folder: Path) -> None:
    folder.mkdir()
    for number in range(FILES):
        lines = [
            f"Log {number}, entry {line}: the lamp at station {number} was trimmed at {line % 24}:00."
            for line in range(LINES)
        ]
        (folder / f"log-{number:03d}.txt").write_text("\n".join(lines))


def ingest_command(folder: Path) -> list[str]:
    return [sys.executable, "-m", "app", "ingest", str(folder), "--collection", "station logs"]


def test_killed_ingestion_resumes_without_duplicates(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    write_corpus(folder)
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}
    process = subprocess.Popen(
        ingest_command(folder), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert process.stdout is not None
    indexed_before_kill = 0
    for line in process.stdout:
        if line.startswith("indexed"):
            indexed_before_kill += 1
        if indexed_before_kill == 5:
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert indexed_before_kill == 5

    resumed = subprocess.run(ingest_command(folder), capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.count("unchanged") >= 5  # what was finished before the kill is not redone
    assert resumed.stdout.count("indexed") + resumed.stdout.count("unchanged") == FILES

    settings = load_settings()
    documents = build_documents(settings, resolve_data_paths(settings.home))
    try:
        info = documents.manifest.get("station logs")
        files = documents.files("station logs")
        assert len(files) == FILES and all(f.status == "indexed" for f in files)
        assert documents.store.count(info.store_name, info.embedder) == sum(f.chunks for f in files)
        for record in files:
            chunks = documents.store.chunks_of(info.store_name, info.embedder, record.path)
            assert [c.index for c in chunks] == list(range(record.chunks))
    finally:
        documents.close()


def hear_ctrl_c() -> None:
    """In the child before it runs Hearth: take Ctrl+C as a terminal would deliver it. A test run started in the
    background (`nohup make test &`) ignores SIGINT, and a child inherits that, so it would never hear it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_cleanly_and_says_how_to_finish(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    write_corpus(folder)
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}
    process = subprocess.Popen(
        ingest_command(folder),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=hear_ctrl_c,
    )
    assert process.stdout is not None and process.stderr is not None
    for line in process.stdout:
        if line.startswith("indexed"):
            process.send_signal(signal.SIGINT)
            break
    process.stdout.read()
    errors = process.stderr.read()
    process.wait(timeout=30)
    assert process.returncode == 130
    assert "What was indexed is kept" in errors and "run the same command again to finish." in errors
    assert "Traceback" not in errors
    resumed = subprocess.run(ingest_command(folder), capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.count("indexed") + resumed.stdout.count("unchanged") == FILES
