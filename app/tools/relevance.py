"""Which tools fit a request, so that a small model is offered only those.

Offered a calculator, a 1.5B model calls it for "Hello!" or "Why does bread rise?": it reads an offered tool as a
hint to use it. The request is compared with each tool's name and description by the embedder Hearth already
has for documents (cosine similarity of the two embeddings); a tool below the threshold (``tools.fit_threshold``)
is not offered for that request, and with none left the model answers without tools. The default was chosen on the
tuning half of the tool question set (``bench/tool_relevance.py``, ``bench/data/tool-relevance.json``).

When the person asked for a call (the page's "call one first"), every tool is offered: they chose.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from backends.base import ToolSpec
from rag.retrieval.embeddings import Embedder

# Below this similarity between a request and a tool's name and description, the tool is not offered (the setting's
# default; bench/data/tool-relevance.json).
FIT_THRESHOLD = 0.06


def tool_text(tool: ToolSpec) -> str:
    """What a tool is compared by: its name in words, and its description."""
    name = tool.name.replace("_", " ").replace("-", " ")
    return f"{name}: {tool.description}" if tool.description.strip() else name


# Each embedder's unit vectors of the tool texts it has embedded: the tools are the same turn after turn, so each
# turn embeds only its request (and any tool not seen before). Bounded: a new server's tools replace the old.
_KEPT: weakref.WeakKeyDictionary[Embedder, dict[str, np.ndarray]] = weakref.WeakKeyDictionary()
KEPT_TEXTS = 512


def similarities(embedder: Embedder, request: str, tools: Sequence[ToolSpec]) -> list[float]:
    """The cosine similarity of ``request`` to each tool's :func:`tool_text`."""
    if not tools:
        return []
    kept = _KEPT.setdefault(embedder, {})
    texts = [tool_text(t) for t in tools]
    new = [text for text in dict.fromkeys(texts) if text not in kept]
    if len(kept) + len(new) > KEPT_TEXTS:
        kept.clear()
        new = list(dict.fromkeys(texts))
    vectors = _unit(embedder.embed([request, *new]))
    kept.update(zip(new, vectors[1:], strict=True))
    return [float(kept[text] @ vectors[0]) for text in texts]


def _unit(vectors: object) -> np.ndarray:
    rows = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1)
    norms[norms == 0] = 1.0
    unit: np.ndarray = rows / norms[:, None]
    return unit


def fitting(scores: Sequence[float], threshold: float = FIT_THRESHOLD) -> list[int]:
    """The indices of the tools whose scores reach ``threshold``, in their order."""
    return [index for index, score in enumerate(scores) if score >= threshold]


def fitting_tools(
    embedder: Embedder, request: str, tools: Sequence[ToolSpec], threshold: float = FIT_THRESHOLD
) -> tuple[ToolSpec, ...]:
    """The tools that fit ``request``."""
    return tuple(tools[i] for i in fitting(similarities(embedder, request, tools), threshold))
