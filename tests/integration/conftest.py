from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.base import LoadOptions
from backends.llamacpp import LlamaCppBackend
from models.gguf import ModelInfo, read_model_info

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
