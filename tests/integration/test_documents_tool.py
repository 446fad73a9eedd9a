"""search_documents, the built-in tool that searches a collection (app/tools/documents_tool.py), with the real
retriever (MiniLM, Chroma, BM25) on the test corpus: it finds the passage, numbers what it shows as sources that
run on across calls, keeps a passage found twice under one number, and says so when nothing matches; and
`hearth chat --tools -c` refuses a collection that does not exist before loading anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.services.library.documents import DocumentServices
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


def test_ask_with_tools_offers_the_collection_as_a_tool_unless_switched_off(
    isolated_home: Path, embedded_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingested = hearth("ingest", str(CORPUS / "lighthouse-history.md"), "-c", "Coast notes", home=isolated_home)
    assert ingested.returncode == 0, ingested.stderr
    run = hearth(
        "ask",
        "Who kept the light?",
        "-c",
        "Coast notes",
        "--tools",
        "--allow-tools",
        "--max-tokens",
        "24",
        home=isolated_home,
    )
    assert run.returncode == 0, run.stderr
    # the calculator does not fit a question about a keeper (app/tools/relevance.py): only the search is offered
    assert "[tools that do not fit the question, not offered: calculator]" in run.stderr, run.stderr
    assert "[tools offered: search_documents]" in run.stderr, run.stderr
    monkeypatch.setenv("HEARTH_TOOLS__SEARCH_DOCUMENTS", "false")
    monkeypatch.setenv("HEARTH_TOOLS__CALCULATOR", "false")
    off = hearth("ask", "Who kept the light?", "-c", "Coast notes", "--tools", "--max-tokens", "8", home=isolated_home)
    assert off.returncode == 0 and "[no tool is on: the model answers without tools]" in off.stderr, off.stderr
    missing = hearth("ask", "hello", "--tools", "-c", "Nowhere", home=isolated_home)
    assert missing.returncode != 0 and "There is no collection called 'Nowhere'" in missing.stderr
