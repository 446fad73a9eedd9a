"""search_documents' numbering (app/tools/documents_tool.py), with a stand-in search: the query cleaned and cut,
numbers running on, a passage found again keeping its number, and nothing found said in words."""

from __future__ import annotations

from app.tools.documents_tool import MAX_QUERY_CHARS, DocumentSearch
from rag.retrieval.retriever import Passage, SearchResult
from rag.store import StoredChunk


def passage(path: str, text: str, index: int = 0) -> Passage:
    return Passage(StoredChunk(f"{path}-{index}", text, path, None, "Intro", index), 1.0, 1, 1)


def test_numbers_run_on_and_a_passage_found_again_keeps_its_number() -> None:
    asked: list[str] = []
    results = {
        "lamps": [passage("/d/a.md", "The lamp burned oil."), passage("/d/b.md", "Wicks were trimmed.")],
        "wicks": [passage("/d/b.md", "Wicks were trimmed."), passage("/d/c.md", "Oil came by boat.")],
    }

    def search(collection: str, query: str, top_k: int) -> SearchResult:
        asked.append(query)
        return SearchResult(results.get(query, []), 0.0, 0.0)

    tool = DocumentSearch("Coast", search, top_k=2)
    text, failed = tool.run({"query": "  lamps \n"})
    assert not failed and text == "[1] a.md · Intro\nThe lamp burned oil.\n\n[2] b.md · Intro\nWicks were trimmed."
    text, _ = tool.run({"query": "wicks"})
    assert text.startswith("[2] b.md") and "[3] c.md · Intro\nOil came by boat." in text
    assert [(s.number, s.path) for s in tool.sources] == [(1, "/d/a.md"), (2, "/d/b.md"), (3, "/d/c.md")]
    assert tool.run({"query": "tides"}) == ("No passage in the collection matches 'tides'.", False)
    tool.run({"query": "x" * 2_000})
    assert asked == ["lamps", "wicks", "tides", "x" * MAX_QUERY_CHARS]
    assert tool.run({}) == ("Give the query: a few words of what to look for.", True)
