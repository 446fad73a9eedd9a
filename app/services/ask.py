"""Answer from a collection: retrieve, pack the passages under the token budget, stream the answer.

:func:`find_sources` is shared with the chat service; :func:`ask` is the one-shot question of ``hearth ask``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.errors import EmptyMessage
from app.services.documents import DocumentServices
from app.services.history import prompt_budget
from app.services.runtime import ModelRuntime
from backends.base import CancelToken, ChatEvent, ChatMessage, GenerationParams
from rag.prompt import RAG_SYSTEM_PROMPT, Source, pack_sources, rag_messages, rag_question

# Tokens kept free for the chat template's framing around the passages.
TEMPLATE_SLACK = 16


@dataclass(frozen=True)
class FoundSources:
    sources: tuple[Source, ...]
    embed_ms: float
    retrieve_ms: float  # keyword + vector search and fusion, after the question was embedded

    @property
    def total_ms(self) -> float:
        return self.embed_ms + self.retrieve_ms


@dataclass(frozen=True)
class AskStarted:
    found: FoundSources
    prompt_tokens: int


class TokenCounting(Protocol):
    """What packing passages needs of a model: its window and its tokenizer."""

    @property
    def context_length(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int: ...


def find_sources(
    documents: DocumentServices,
    backend: TokenCounting,
    collection: str,
    question: str,
    system_prompt: str,
    params: GenerationParams,
    top_k: int,
) -> FoundSources:
    """The best passages for ``question``, as many as fit beside the system prompt, the question and the answer's
    reserve. Passages come before older conversation turns: the caller fits the history into what is left."""
    found = documents.retriever.search(collection, question, top_k=top_k)
    frame = [ChatMessage("system", system_prompt), ChatMessage("user", rag_question(question, []))]
    budget = prompt_budget(backend.context_length, params.max_new_tokens) - backend.count_chat_tokens(frame)
    sources = pack_sources(found.passages, budget - TEMPLATE_SLACK, backend.count_tokens)
    return FoundSources(tuple(sources), found.embed_ms, found.search_ms)


def ask(
    documents: DocumentServices,
    runtime: ModelRuntime,
    collection: str,
    question: str,
    params: GenerationParams,
    top_k: int = 5,
    cancel: CancelToken | None = None,
) -> Iterator[AskStarted | ChatEvent]:
    if not question.strip():
        raise EmptyMessage("There is nothing to ask.", "Type a question first.")
    with runtime.lease() as engine:
        found = find_sources(documents, engine, collection, question, RAG_SYSTEM_PROMPT, params, top_k)
        messages = rag_messages(question, found.sources)
        yield AskStarted(found, engine.count_chat_tokens(messages))
        yield from engine.stream_chat(messages, params, cancel or CancelToken())
