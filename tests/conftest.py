"""Shared fixtures. Every test gets its own data directory; nothing touches the user's real one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.hardware import block_telemetry_modules
from tests.helpers import RUN_VARIABLE, remove_made_accounts, require

pytest_plugins = ["tests.suite_clock"]

# Test processes import OpenVINO directly too; it must not phone home from them either.
block_telemetry_modules()


# Files that took a minute or more in a full run (bench/data/suite-time.parallel.txt), heaviest first: they are
# started first, so that with TEST_WORKERS=2 both workers end together instead of one waiting out the last long
# file (in one worker the order changes nothing). The other files keep their order behind them.
HEAVY_FIRST = (
    "test_tuning.py",
    "test_cli.py",
    "test_tuning_memory.py",
    "test_rpc_worker.py",
    "test_retrieval_floor.py",
    "test_bench_contention_cli.py",
    "test_ingest_crash.py",
    "test_quantize.py",
    "test_worker_walls.py",
    "test_hostile_templates.py",
    "test_embedding_limits.py",
    "test_llamacpp_parallel.py",
    "test_chat_page.py",
    "test_documents_page.py",
    "test_tuning_page.py",
    "test_models_page.py",
    "test_tool_calls_page.py",
    "test_page_security.py",
    "test_api_clients.py",
    "test_bench_page.py",
    "test_chat_controls.py",
    "test_desktop_window.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests stay in order


def pytest_configure(config: pytest.Config) -> None:
    """A run's main process names the run by its process id; its parallel workers inherit the name."""
    if not hasattr(config, "workerinput"):
        os.environ[RUN_VARIABLE] = str(os.getpid())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The run's main process (not one of its parallel workers) deletes the test accounts the run made."""
    if not hasattr(session.config, "workerinput"):
        remove_made_accounts()


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
    from models.embedded import embedded_chat_model
    from models.shared.errors import ModelFileError

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
