"""llama.cpp's own lines are kept off the terminal: a model llama.cpp cannot load is explained
in Hearth's words on the terminal, and llama.cpp's error lines are in the data folder's owner-only
logs/llama.cpp.log; with -v they are on the terminal as before."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.helpers import write_tiny_gguf
from tests.integration.conftest import as_other
from tests.integration.test_cli import hearth

pytestmark = pytest.mark.integration


def test_llamacpp_lines_go_to_the_log_file_unless_verbose(
    isolated_home: Path, tmp_path: Path, llama_cpp_installed: None
) -> None:
    broken = write_tiny_gguf(tmp_path / "tiny.gguf")  # its hyperparameters are missing: llama.cpp refuses it
    quiet = hearth("chat", "hi", "--model", str(broken), home=isolated_home)
    assert quiet.returncode == 1 and "error: llama.cpp could not load tiny.gguf." in quiet.stderr
    assert "llama_model_load" not in quiet.stderr and " llama.cpp: " not in quiet.stderr, quiet.stderr
    log = isolated_home / "logs" / "llama.cpp.log"
    kept = log.read_text()
    assert "ERROR llama.cpp: llama_model_load: error loading model" in kept
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(log.parent.stat().st_mode) == 0o700

    verbose = hearth("-v", "chat", "hi", "--model", str(broken), home=isolated_home)
    assert verbose.returncode == 1 and "ERROR llama.cpp: llama_model_load: error loading model" in verbose.stderr
    assert log.read_text() == kept  # shown instead of kept


def test_another_account_cannot_read_what_llamacpp_said(
    tmp_path: Path, llama_cpp_installed: None, other_account: tuple[int, int], open_folder: Path
) -> None:
    """The log may quote paths and a model's metadata: another account (``setpriv``) cannot read it, even where the
    data folder itself was left open to others (it reaches the folder, and is refused the file)."""
    home = open_folder / "home"
    broken = write_tiny_gguf(tmp_path / "tiny.gguf")
    assert hearth("chat", "hi", "--model", str(broken), home=home).returncode == 1
    home.chmod(0o755)
    (home / "logs").chmod(0o755)
    listed = as_other(other_account, "/bin/ls", str(home / "logs"))
    assert listed.returncode == 0 and "llama.cpp.log" in listed.stdout, listed.stderr
    tried = as_other(other_account, "/bin/cat", str(home / "logs" / "llama.cpp.log"))
    assert tried.returncode != 0 and "Permission denied" in tried.stderr, tried.stdout + tried.stderr
    assert "llama_model_load" not in tried.stdout
