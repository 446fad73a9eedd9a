"""A model split into several GGUF files (as llama.cpp's gguf-split writes them and as large models are published):
the embedded SmolLM2 split into three parts is added by its first part, listed as one model of the whole size, and
answers through Hearth's engine with the text the single file gives; a later part, or a first part without the
others, is refused with what to do; tuning, which reads one file, says so before starting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gguf_files import write_split_copy
from tests.helpers import run_hearth

pytestmark = pytest.mark.integration


def _chat(home: Path, model: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "app", "chat", "--model", str(model), "--backend", "llamacpp"),
            *("--temperature", "0", "--max-tokens", "24", "Name three primary colours."),
        ],
        env={**os.environ, "HEARTH_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory, embedded_model: Path) -> list[Path]:
    return write_split_copy(embedded_model, tmp_path_factory.mktemp("split"), 3)


def test_a_split_model_is_one_model_of_its_whole_size_and_answers_as_the_single_file_does(
    parts: list[Path], embedded_model: Path, isolated_home: Path
) -> None:
    added = run_hearth(isolated_home, "models", "import", str(parts[0]))
    assert added.returncode == 0, added.stderr
    listed = run_hearth(isolated_home, "models", "list", "--json")
    rows = [row for row in json.loads(listed.stdout) if row["stored"]["path"] == str(parts[0].resolve())]
    assert len(rows) == 1, listed.stdout
    whole = sum(part.stat().st_size for part in parts)
    assert rows[0]["info"]["file_size_bytes"] == whole > embedded_model.stat().st_size
    assert rows[0]["info"]["parts"] == 3
    alone, split = _chat(isolated_home, embedded_model), _chat(isolated_home, parts[0])
    assert alone.returncode == 0 and split.returncode == 0, split.stderr[-2000:]
    assert split.stdout == alone.stdout and len(alone.stdout.strip()) > 10


def test_a_later_part_is_refused_naming_the_first_and_tuning_says_it_reads_one_file(
    parts: list[Path], isolated_home: Path, tmp_path: Path
) -> None:
    later = run_hearth(isolated_home, "models", "import", str(parts[1]))
    assert later.returncode != 0
    assert f"{parts[1].name} is part 2 of a model split into 3 files." in later.stderr
    assert f"by its first part, {parts[0].name}" in later.stderr
    data = tmp_path / "facts.jsonl"
    said = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    data.write_text(json.dumps({"messages": said}) + "\n")
    tune = run_hearth(isolated_home, "tune", str(data), "--name", "split", "--model", str(parts[0]), "--steps", "1")
    assert tune.returncode != 0
    assert "is split into 3 files, and Hearth tunes a model kept in one" in tune.stderr, tune.stderr[-2000:]
