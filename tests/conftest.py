"""Shared fixtures. Every test gets its own data directory; nothing touches the user's real one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.hardware import block_telemetry_modules
from tests.helpers import require

# Test processes import OpenVINO directly too; it must not phone home from them either.
block_telemetry_modules()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith("HEARTH_"):
            monkeypatch.delenv(key)
    home = tmp_path / "hearth-home"
    monkeypatch.setenv("HEARTH_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def embedded_model() -> Path:
    from app.errors import ModelFileError
    from models.embedded import embedded_chat_model

    try:
        path = embedded_chat_model()
    except ModelFileError as exc:
        require(False, "the embedded SmolLM2 model", exc.remedy)
        raise
    return path


@pytest.fixture(scope="session")
def llama_cpp_installed() -> None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        require(False, "llama-cpp-python", "run `make setup`")


@pytest.fixture
def artifacts_dir() -> Iterator[Path]:
    path = Path(__file__).resolve().parent.parent / "test-artifacts"
    path.mkdir(exist_ok=True)
    yield path
