"""The ways a follow-up can be searched (``rag.follow_up_search``), on a real collection with the real embedder:
its own words by default, or with the previous question's, both rankings in turns, or the previous answer's files
first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from app.services.answering.sources import find_sources
from app.services.library.documents import DocumentServices
from backends.base import ChatMessage, GenerationParams
from rag.prompt import RAG_SYSTEM_PROMPT

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
FIRST = "What colour is the flash of the Skerry light?"
FOLLOW_UP = "How often?"  # names nothing of its subject


class _Counting:
    context_length = 4096

    def __init__(self, documents: DocumentServices) -> None:
        self._documents = documents

    def count_tokens(self, text: str) -> int:
        return self._documents.embedder.count_tokens(text)

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self.count_tokens(m.content) + 4 for m in messages)


def _files(documents: DocumentServices, way: str, previous_files: Sequence[str] = ()) -> list[str]:
    found = find_sources(
        replace(documents, follow_up_search=way),
        _Counting(documents),
        "Coast",
        FOLLOW_UP,
        RAG_SYSTEM_PROMPT,
        GenerationParams(max_new_tokens=100),
        3,
        previous=FIRST,
        previous_files=previous_files,
    )
    return [Path(s.path).name for s in found.sources]


def test_each_way_of_searching_a_follow_up(documents: DocumentServices) -> None:
    names = ("lighthouse-history.md", "sourdough.html", "garden-guide.txt", "kite-flying.docx")
    list(documents.ingestor.ingest([CORPUS / name for name in names], "Coast"))
    alone = [Path(p.chunk.path).name for p in documents.retriever.search("Coast", FOLLOW_UP, top_k=3).passages]
    assert _files(documents, "question") == alone  # the default: the follow-up's own words, as before
    assert alone[0] != "lighthouse-history.md", alone  # alone, its words find another file first
    assert _files(documents, "with-previous")[0] == "lighthouse-history.md"
    assert "lighthouse-history.md" in _files(documents, "fused")
    first = documents.retriever.search("Coast", FIRST, top_k=3).passages
    assert Path(first[0].chunk.path).name == "lighthouse-history.md"
    same = _files(documents, "same-files", [first[0].chunk.path])
    assert same[0] == "lighthouse-history.md" and same == sorted(same, key=lambda n: n != "lighthouse-history.md")
