"""The passages a question is answered from: files attached to the conversation (whole when they fit, else their
best passages) and the best passages of a collection, packed under the prompt's token budget. Used by the one turn
builder (``documents_turn``) that the page, the API and ``hearth ask`` share."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest
from typing import Protocol

from app.services.answering.attachment_plan import AttachmentUse, plan_attachments, worth_counting
from app.services.answering.history import prompt_budget
from app.services.library.documents import DocumentServices
from backends.base import ChatMessage, GenerationParams
from rag.attachments import ReadAttachment, Searchable, search_attachments
from rag.excerpts import CANDIDATES, MORE_PASSAGES, choose, excerpt, sentences, windows
from rag.prompt import WHOLE_FILE, Candidate, Source, pack_candidates, rag_question, source_cost
from rag.retrieval.embeddings import Embedder

# Tokens kept free for the chat template's framing around the passages.
TEMPLATE_SLACK = 16


@dataclass(frozen=True)
class FoundSources:
    sources: tuple[Source, ...]
    embed_ms: float
    retrieve_ms: float  # keyword + vector search and fusion, after the question was embedded
    uses: tuple[AttachmentUse, ...] = ()  # how each file attached to the conversation was used

    @property
    def total_ms(self) -> float:
        return self.embed_ms + self.retrieve_ms


class TokenCounting(Protocol):
    """What packing passages needs of a model: its window and its tokenizer."""

    @property
    def context_length(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int: ...


def search_text(question: str, previous: str | None) -> str:
    """A follow-up's words with the previous question's before them (a follow-up often names nothing of its
    subject); a first question's alone."""
    if previous and previous.strip():
        return f"{previous.strip()}\n{question}"
    return question


def interleaved(first: Sequence[Candidate], second: Sequence[Candidate]) -> list[Candidate]:
    """Two rankings taken in turns, best first, each passage once."""
    merged: list[Candidate] = []
    for pair in zip_longest(first, second):
        for candidate in pair:
            if candidate is not None and candidate not in merged:
                merged.append(candidate)
    return merged


# How far down its own ranking a follow-up looks for passages of the files the previous answer came from.
SAME_FILES_WIDTH = 12


def same_files_first(ranked: Sequence[Candidate], files: Sequence[str]) -> list[Candidate]:
    """``ranked`` with the passages of ``files`` first, each group in its own order."""
    kept = set(files)
    return [c for c in ranked if c.path in kept] + [c for c in ranked if c.path not in kept]


def find_sources(
    documents: DocumentServices,
    backend: TokenCounting,
    collection: str | None,
    question: str,
    system_prompt: str,
    params: GenerationParams,
    top_k: int,
    attached: Sequence[ReadAttachment] = (),
    previous: str | None = None,
    previous_files: Sequence[str] = (),
) -> FoundSources:
    """The passages for ``question``, as many as fit beside the system prompt, the question and the answer's
    reserve: first the files attached to the conversation that fit whole (:func:`plan_attachments`), then the best
    passages of the other attached files, then the best of ``collection``'s. Passages come before older
    conversation turns: the caller fits the history into what is left. ``previous``: the question asked before
    this one in the conversation, searched with it where the documents' settings say so (:func:`search_text`);
    ``previous_files``: the files the previous answer's passages came from, whose passages a follow-up prefers
    where the settings say so (:func:`same_files_first`)."""
    frame = [ChatMessage("system", system_prompt), ChatMessage("user", rag_question(question, []))]
    room = prompt_budget(backend.context_length, params.max_new_tokens) - backend.count_chat_tokens(frame)
    room -= TEMPLATE_SLACK
    whole = [Source(0, f.name, None, WHOLE_FILE, f.text) for f in attached]
    costs = [source_cost(s, backend.count_tokens) if worth_counting(len(s.text), room) else None for s in whole]
    modes = plan_attachments(costs, room)
    sources: list[Source] = []
    for source, cost, mode in zip(whole, costs, modes, strict=True):
        if mode == "whole" and cost is not None:
            sources.append(Source(len(sources) + 1, source.path, None, WHOLE_FILE, source.text))
            room -= cost
    searched = [(i, f) for i, (f, mode) in enumerate(zip(attached, modes, strict=True)) if mode == "searched"]
    follow_ups = documents.follow_up_search
    search = search_text(question, previous) if follow_ups == "with-previous" else question
    candidates: list[Candidate] = []
    origin: list[int | None] = []  # which attached file each candidate is from (None: the collection)
    embed_ms = retrieve_ms = 0.0
    if searched:
        started = time.perf_counter()
        vector = documents.embedder.embed([search])[0]
        embed_ms += (time.perf_counter() - started) * 1000
        files = [Searchable(i, f.passages, f.vectors) for i, f in searched]
        hits, took_ms = search_attachments(files, search, vector, top_k)
        retrieve_ms += took_ms
        for hit in hits:
            name = attached[hit.attachment_id].name
            candidates.append(Candidate(name, hit.passage.page, hit.passage.section, hit.passage.text))
            origin.append(hit.attachment_id)
    if collection:
        wide = follow_ups == "same-files" and bool(previous_files)
        wanted = max(top_k, CANDIDATES) if documents.excerpts else top_k
        found = documents.retriever.search(collection, search, top_k=max(wanted, SAME_FILES_WIDTH) if wide else wanted)
        embed_ms += found.embed_ms
        retrieve_ms += found.search_ms
        ranked = [Candidate(p.chunk.path, p.chunk.page, p.chunk.section, p.chunk.text) for p in found.passages]
        if wide:
            ranked = same_files_first(ranked, previous_files)[:wanted]
        if follow_ups == "fused" and search_text(question, previous) != question:
            more = documents.retriever.search(collection, search_text(question, previous), top_k=wanted)
            embed_ms += more.embed_ms
            retrieve_ms += more.search_ms
            also = [Candidate(p.chunk.path, p.chunk.page, p.chunk.section, p.chunk.text) for p in more.passages]
            ranked = interleaved(ranked, also)[:wanted]
        if documents.excerpts:
            started = time.perf_counter()
            ranked = excerpts_of(documents.embedder, search, ranked, top_k, backend.count_tokens)
            embed_ms += (time.perf_counter() - started) * 1000
        candidates.extend(ranked)
        origin.extend(None for _ in ranked)
    packed = pack_candidates(candidates, room, backend.count_tokens, first=len(sources) + 1)
    sources.extend(packed)
    used = origin[: len(packed)]
    uses = tuple(
        AttachmentUse(f.name, "whole")
        if mode == "whole"
        else AttachmentUse(f.name, "searched", sum(1 for o in used if o == i))
        for i, (f, mode) in enumerate(zip(attached, modes, strict=True))
    )
    return FoundSources(tuple(sources), embed_ms, retrieve_ms, uses)


def excerpts_of(
    embedder: Embedder, question: str, found: Sequence[Candidate], top_k: int, count_tokens: Callable[[str], int]
) -> list[Candidate]:
    """The best sentences of ``found`` (the ranking, best first) in the room its first ``top_k`` passages take,
    one excerpt per passage (``rag/excerpts.py``), the passage holding the best window first."""
    said = [sentences(candidate.text) for candidate in found]
    cut = windows(said)
    if not cut:
        return list(found[:top_k])
    vectors = embedder.embed([question, *(w.text for w in cut)])
    similarity = [float(v) for v in vectors[1:] @ vectors[0]]
    budget = sum(count_tokens(candidate.text) for candidate in found[:top_k])
    chosen = choose(said, cut, similarity, count_tokens, budget, most_passages=top_k + MORE_PASSAGES)
    return [replace(found[passage], text=excerpt(said[passage], indices)) for passage, indices in chosen]
