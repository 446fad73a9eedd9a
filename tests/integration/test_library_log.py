"""llama.cpp's own lines are kept off the terminal (issue 37, item 8): a model llama.cpp cannot load is explained
in Hearth's words on the terminal, and llama.cpp's error lines are in the data folder's owner-only
logs/llama.cpp.log; with -v they are on the terminal as before."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.helpers import write_tiny_gguf
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
