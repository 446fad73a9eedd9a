from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.container import Services, build_services
from app.services.documents import DocumentServices, build_documents
from app.settings import load_settings
from backends.base import LoadOptions
from backends.llamacpp import LlamaCppBackend
from models.gguf import ModelInfo, read_model_info
from rag.embeddings import SentenceTransformerEmbedder, default_embedder

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
def embedder() -> SentenceTransformerEmbedder:
    """The embedded MiniLM, loaded once for every test that indexes or searches."""
    return default_embedder()


@pytest.fixture
def chat(isolated_home: Path, embedded_model: Path) -> Iterator[Services]:
    """The app's services with the embedded model loaded in a 1024-token context."""
    services = build_services(load_settings(model={"context_length": 1024}))
    list(services.runtime.load(services.model_choice()))
    yield services
    services.close()


@pytest.fixture
def documents(isolated_home: Path, embedder: SentenceTransformerEmbedder) -> Iterator[DocumentServices]:
    """The document services with default settings in the test's own data folder (a file may override it)."""
    settings = load_settings()
    paths = resolve_data_paths(settings.home)
    paths.root.mkdir(parents=True, exist_ok=True)
    services = build_documents(settings, paths, embedder)
    yield services
    services.close()
