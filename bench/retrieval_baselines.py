"""The plain ways of retrieving that Hearth's hybrid search must beat, measured in the same run on the same files
(used by ``bench/rag_retrieval.py --baselines``):

- **plain dense**: the common recipe: each file's text (a PDF page by page), LangChain's
  ``RecursiveCharacterTextSplitter`` at 200 tokens with 30 overlap (counted by MiniLM's tokenizer), the same MiniLM
  model, cosine similarity. No sections, no keyword search, no heading text.
- **dense only** and **keyword only**: one of the two rankings Hearth fuses, over Hearth's own passages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rag.evaluation import Retrieved

PLAIN_CHUNK_TOKENS = 200
PLAIN_OVERLAP_TOKENS = 30

Search = Callable[[str], list[Retrieved]]


def plain_dense(docs: Path, embedder: Any, top_k: int) -> Search:
    """Index ``docs`` the plain way (in memory) and return its search."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from rag.reading.loaders import SUPPORTED_SUFFIXES, load_file
    from rag.reading.sections import Skipped

    splitter = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        embedder.tokenizer(), chunk_size=PLAIN_CHUNK_TOKENS, chunk_overlap=PLAIN_OVERLAP_TOKENS
    )
    passages: list[Retrieved] = []
    for path in sorted(p for p in docs.rglob("*") if p.suffix.lower() in SUPPORTED_SUFFIXES):
        try:
            sections = load_file(path)
        except Skipped:
            continue
        pages: dict[int | None, list[str]] = {}
        for section in sections:
            pages.setdefault(section.page, []).append(section.text)
        for page, texts in pages.items():
            for text in splitter.split_text("\n\n".join(texts)):
                passages.append(Retrieved(path.name, page, text))
    vectors = embedder.embed([p.text for p in passages])

    def search(question: str) -> list[Retrieved]:
        scores = vectors @ embedder.embed([question])[0]
        return [passages[i] for i in np.argsort(-scores)[:top_k]]

    return search


def dense_only(documents: Any, collection: str, top_k: int) -> Search:
    info = documents.manifest.get(collection)

    def search(question: str) -> list[Retrieved]:
        vector = documents.embedder.embed([question])[0]
        hits = documents.store.nearest(info.store_name, info.embedder, vector, top_k)
        return [Retrieved(Path(c.path).name, c.page, c.text) for c in hits]

    return search


def keyword_only(documents: Any, collection: str, top_k: int) -> Search:
    info = documents.manifest.get(collection)

    def search(question: str) -> list[Retrieved]:
        keyword = documents.retriever.keyword_index(info)
        hits = [keyword.chunks[i] for i, _ in keyword.index.search(question, top_k)]
        return [Retrieved(Path(c.path).name, c.page, c.text) for c in hits]

    return search
