"""Services that find files of the project by their own place in the tree still find them after the folders moved:
the held-out text the quantization ladder measures on, and the root every child process (the engine, the reader, a
tuning run, the speed measurement) is given first on its PYTHONPATH."""

from __future__ import annotations

import os

import pytest

from app.services.catalog.models import HELDOUT_TEXT
from backends.child_env import PROJECT_ROOT, child_environment


def test_the_held_out_text_and_the_project_root_are_found() -> None:
    assert HELDOUT_TEXT.is_file()
    assert (PROJECT_ROOT / "app" / "__init__.py").is_file() and (PROJECT_ROOT / "models" / "__init__.py").is_file()


def test_a_childs_environment_puts_the_project_first_and_keeps_what_the_parent_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    env = child_environment(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(PROJECT_ROOT), "/elsewhere"]
    assert env["HF_HUB_OFFLINE"] == "0" and env["TRANSFORMERS_OFFLINE"] == "1"
    monkeypatch.delenv("PYTHONPATH")
    assert child_environment()["PYTHONPATH"] == str(PROJECT_ROOT)
