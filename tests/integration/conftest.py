import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.container import Services, build_services
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from backends.base import LoadOptions
from backends.llamacpp.backend import LlamaCppBackend
from models.gguf import ModelInfo, read_model_info
from rag.retrieval.embeddings import Embedder, SentenceTransformerEmbedder, configured_embedder, default_embedder
from tests.helpers import ensure_account, require

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def model_info(embedded_model: Path, llama_cpp_installed: None) -> ModelInfo:
    return read_model_info(embedded_model)


@pytest.fixture(scope="session")
def llama(model_info: ModelInfo) -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(context_length=2048, threads=2, seed=7)))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The embedded MiniLM as Hearth runs it by default (OpenVINO: rag.embedder_runtime), loaded once for every test
    that indexes or searches; the first run on a machine converts it into the account's cache, as Hearth does."""
    return configured_embedder("openvino")


@pytest.fixture(scope="session")
def sentence_transformers() -> SentenceTransformerEmbedder:
    """The same model run by sentence-transformers (torch), the other runtime Hearth offers, for the tests that
    hold the two to the same vectors."""
    return default_embedder()


@pytest.fixture
def chat(isolated_home: Path, embedded_model: Path) -> Iterator[Services]:
    """The app's services with the embedded model loaded in a 1024-token context."""
    services = build_services(load_settings(model={"context_length": 1024}))
    list(services.runtime.load(services.model_choice()))
    yield services
    services.close()


@pytest.fixture
def documents(isolated_home: Path, embedder: Embedder) -> Iterator[DocumentServices]:
    """The document services with default settings in the test's own data folder (a file may override it)."""
    settings = load_settings()
    paths = resolve_data_paths(settings.home)
    paths.root.mkdir(parents=True, exist_ok=True)
    services = build_documents(settings, paths, embedder)
    yield services
    services.close()


OTHER_ACCOUNT = "hearth-test-other"


@pytest.fixture(scope="module")
def other_account() -> Iterator[tuple[int, int]]:
    """A throwaway unprivileged account (the tests run as root in CI); with the system's python3, which it can run
    (one under root's home, as pyenv's and the venv's are, it cannot). Made once under a lock, since the suite's
    workers run side by side (`make test` runs two), and removed when the whole run ends
    (`tests/conftest.py`)."""
    require(os.geteuid() == 0, "root (to create a second account)", "run the suite as root, as CI does")
    require(
        shutil.which("useradd") is not None and shutil.which("setpriv") is not None,
        "useradd and setpriv",
        "apt-get install -y passwd util-linux",
    )
    require(Path("/usr/bin/python3").exists(), "the system's python3", "apt-get install -y python3")
    yield ensure_account(OTHER_ACCOUNT)


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder under /tmp that other accounts may enter (0755), removed afterwards: pytest's own folders are
    closed to them, so a refusal met there would be for the wrong reason."""
    folder = Path(tempfile.mkdtemp(prefix="hearth-open-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def as_other(account: tuple[int, int], *command: str) -> subprocess.CompletedProcess[str]:
    """``command`` run as ``account`` (``other_account``'s uid and gid) with no groups, from /, with a bare PATH."""
    return subprocess.run(
        ["setpriv", f"--reuid={account[0]}", f"--regid={account[1]}", "--clear-groups", *command],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
