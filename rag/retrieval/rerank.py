"""Optional second pass over the fused candidates: a cross-encoder reads the question and each passage together
and scores the pair, which orders passages better than either ranking alone but costs a model call per passage.
Off unless the user points Hearth at a cross-encoder on disk (nothing is ever downloaded)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from models.shared.errors import HearthError
from rag.retrieval.retriever import Passage


class RerankerUnavailable(HearthError):
    """The configured reranker model cannot be used."""


class CrossEncoderReranker:
    def __init__(self, path: Path, batch_size: int = 16) -> None:
        self.path = path
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = load_cross_encoder(self.path)
            return self._model

    def rerank(self, query: str, passages: Sequence[Passage]) -> list[Passage]:
        if not passages:
            return []
        scores = self.model().predict(
            [(query, p.chunk.text) for p in passages], batch_size=self.batch_size, show_progress_bar=False
        )
        scored = [dataclasses.replace(p, score=float(s)) for p, s in zip(passages, scores, strict=True)]
        return sorted(scored, key=lambda p: p.score, reverse=True)


def load_cross_encoder(path: Path) -> Any:
    folder = path.expanduser()
    if not (folder / "config.json").is_file():
        raise RerankerUnavailable(
            f"The reranker {folder} is not a model folder (no config.json there).",
            "Point HEARTH_RAG__RERANKER_PATH at a local sentence-transformers cross-encoder folder, or unset it.",
        )
    from sentence_transformers import CrossEncoder

    try:
        return CrossEncoder(str(folder), num_labels=1, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise RerankerUnavailable(
            f"The reranker {folder} could not be loaded ({exc}).",
            "Check that the folder holds a complete cross-encoder model, or unset HEARTH_RAG__RERANKER_PATH.",
        ) from exc
