"""Answer a question from a collection: retrieve, pack the passages under the token budget, stream the answer.

Yields :class:`AskStarted` (the numbered sources and how long retrieval took) and then the backend's events.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from app.services.documents import DocumentServices
from app.services.history import prompt_budget
from app.services.runtime import ModelRuntime
from backends.base import CancelToken, ChatEvent, GenerationParams
from rag.prompt import Source, pack_sources, rag_messages

# Tokens kept free for the chat template's framing around the passages.
TEMPLATE_SLACK = 16


@dataclass(frozen=True)
class AskStarted:
    sources: list[Source]
    embed_ms: float
    retrieve_ms: float
    prompt_tokens: int


def ask(
    documents: DocumentServices,
    runtime: ModelRuntime,
    collection: str,
    question: str,
    params: GenerationParams,
    top_k: int = 5,
    cancel: CancelToken | None = None,
) -> Iterator[AskStarted | ChatEvent]:
    from app.errors import EmptyMessage

    if not question.strip():
        raise EmptyMessage("There is nothing to ask.", "Type a question first.")
    backend = runtime.backend()
    found = documents.retriever.search(collection, question, top_k=top_k)
    fixed = backend.count_chat_tokens(rag_messages(question, []))
    budget = prompt_budget(backend.context_length, params.max_new_tokens) - fixed
    sources = pack_sources(found.passages, budget - TEMPLATE_SLACK, backend.count_tokens)
    messages = rag_messages(question, sources)
    prompt_tokens = backend.count_chat_tokens(messages)
    yield AskStarted(sources, found.embed_ms, found.search_ms, prompt_tokens)
    yield from backend.stream_chat(messages, params, cancel or CancelToken())
