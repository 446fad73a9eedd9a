"""`hearth ingest` as a user runs it (a real subprocess, the real reader, MiniLM and Chroma): progress inside a
long file, and no tokenizer warning about text longer than the embedding model reads."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_ingest_progress import long_pdf

pytestmark = pytest.mark.integration


def test_ingest_shows_progress_inside_a_long_file_and_no_tokenizer_warning(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    long_pdf(folder / "manual.pdf", pages=20)
    # One paragraph far longer than the model's 256 tokens: counted and cut, never given to the model whole.
    (folder / "log.txt").write_text("The keeper trimmed the wick and wound the clockwork. " * 200)
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}
    result = subprocess.run(
        [sys.executable, "-m", "app", "ingest", str(folder), "--collection", "Manuals"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "Token indices sequence length" not in result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    # In a log (stderr is not a terminal) a line per step of each file: its place, its name, what is done to it.
    assert any(line.startswith("[1/2] log.txt · reading") for line in lines), result.stderr
    assert any(line.startswith("[2/2] manual.pdf · reading") for line in lines), result.stderr
    assert any(line.startswith("[2/2] manual.pdf · embedding") and " passages" in line for line in lines), lines
    assert "indexed    manual.pdf" in result.stdout and "indexed    log.txt" in result.stdout
    assert lines[-1].startswith("2 indexed, 0 unchanged, 0 skipped, 0 removed")
