"""A collection as a built-in tool: ``search_documents`` lets the model search the user's
documents again, with words of its own choosing, and cite what it found as numbered sources, as answers from
documents do. The numbers run on across the calls of one answer, and a passage found twice keeps its number, so
every [n] in the answer points at one passage the user can check. Runs only Hearth's own retriever: no network."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.tools.toolbox import BUILT_IN, Offered
from backends.base import ToolSpec
from rag.prompt import Source
from rag.retrieval.retriever import SearchResult

NAME = "search_documents"
MAX_QUERY_CHARS = 500
MAX_GRAMMAR_QUERY_CHARS = 200  # what the model may write (a longer query, typed by an API client, is cut)


@dataclass
class DocumentSearch:
    """Searches one collection; ``sources`` are the passages found so far, numbered as the model was shown them."""

    collection: str
    search: Callable[[str, str, int], SearchResult]  # (collection, query, top_k): the retriever's search
    top_k: int = 5
    sources: list[Source] = field(default_factory=list)

    def spec(self) -> ToolSpec:
        parameters = {
            "type": "object",
            # Held to a few words by the grammar: a model made to call (the embedded one) wrote an empty query.
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What to look for, in a few words",
                    "minLength": 2,
                    "maxLength": MAX_GRAMMAR_QUERY_CHARS,
                }
            },
            "required": ["query"],
        }
        description = (
            f"Search the user's documents (the collection {self.collection!r}) for passages about a query. Returns "
            "numbered passages with where they come from; cite them in the answer by their numbers, like [2]."
        )
        return ToolSpec(NAME, description, json.dumps(parameters))

    def offered(self) -> Offered:
        return Offered(self.spec(), BUILT_IN, NAME, self.run)

    def run(self, arguments: dict[str, object]) -> tuple[str, bool]:
        query = " ".join(str(arguments.get("query", "")).split())[:MAX_QUERY_CHARS]
        if not query:
            return "Give the query: a few words of what to look for.", True
        found = self.search(self.collection, query, self.top_k)
        if not found.passages:
            return f"No passage in the collection matches {query!r}.", False
        return "\n\n".join(f"[{s.number}] {s.label}\n{s.text}" for s in self._numbered(found)), False

    def _numbered(self, found: SearchResult) -> Sequence[Source]:
        known = {(s.path, s.page, s.section, s.text): s for s in self.sources}
        shown = []
        for passage in found.passages:
            chunk = passage.chunk
            key = (chunk.path, chunk.page, chunk.section, chunk.text)
            source = known.get(key)
            if source is None:
                source = Source(len(self.sources) + 1, chunk.path, chunk.page, chunk.section, chunk.text)
                self.sources.append(source)
                known[key] = source
            shown.append(source)
        return shown
