"""search_documents, the built-in tool that searches a collection (app/tools/documents_tool.py), with the real
retriever (MiniLM, Chroma, BM25) on the test corpus: it finds the passage, numbers what it shows as sources that
run on across calls, keeps a passage found twice under one number, and says so when nothing matches; and
`hearth chat --tools -c` refuses a collection that does not exist before loading anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.services.documents import DocumentServices
from app.tools.documents_tool import DocumentSearch
from app.tools.toolbox import ToolBox
from backends.base import ToolCall
from tests.integration.test_cli import hearth

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).parents[1] / "data" / "corpus"


def test_searches_number_sources_across_calls_and_keep_a_passage_under_one_number(
    documents: DocumentServices,
) -> None:
    list(documents.ingestor.ingest([CORPUS / "lighthouse-history.md", CORPUS / "sourdough.html"], "Coast notes"))
    search = DocumentSearch("Coast notes", documents.retriever.search, top_k=2)
    box = ToolBox((search.offered(),))
    assert "Coast notes" in box.specs()[0].description
    first, failed = box.run(ToolCall("c1", "search_documents", json.dumps({"query": "lighthouse keeper"})))
    assert not failed and first.startswith("[1] lighthouse-history.md")
    assert [s.number for s in search.sources] == [1, 2]
    second, _ = box.run(ToolCall("c2", "search_documents", json.dumps({"query": "sourdough starter feeding"})))
    assert "sourdough.html" in second
    numbers = [s.number for s in search.sources]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 3
    again, _ = box.run(ToolCall("c3", "search_documents", json.dumps({"query": "lighthouse keeper"})))
    assert again.startswith("[1] lighthouse-history.md") and [s.number for s in search.sources] == numbers
    empty, failed = box.run(ToolCall("c4", "search_documents", json.dumps({"query": "   "})))
    assert failed and "Give the query" in empty


def test_chat_with_tools_refuses_a_collection_that_does_not_exist(isolated_home: Path) -> None:
    run = hearth("chat", "hello", "--tools", "-c", "Nowhere", home=isolated_home)
    assert run.returncode != 0 and "There is no collection called 'Nowhere'" in run.stderr
    plain = hearth("chat", "hello", "-c", "Nowhere", home=isolated_home)
    assert plain.returncode != 0 and "--collection goes with --tools" in plain.stderr
