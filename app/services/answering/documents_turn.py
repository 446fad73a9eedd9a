"""One turn answered from documents, built and finished the same way for the page (``ChatService``), the API
(``app/api/generation.py``) and ``hearth ask``.

Building: the passages are found for the question (files attached to the conversation first, then the collection),
numbered on from the numbers earlier turns showed, and the conversation is fitted around them (``assemble``: the
oldest turns go first, and a cut the previous prompt made is kept while it fits). The document rules go in front of
the user's own system prompt. The adapter travels in the generation parameters, which the front end chose.

Finishing, once the answer is written: an answer that only pointed at a passage ("see passage [2]") gets the name
that passage gives (one short follow-up), then every citation is checked against the passages and moved to the one
that holds the claim's terms, and a citing answer none of whose own terms any passage holds says first that it was
not found in the documents, its citations taken off (``rag.support``). The front end shows the result its own way:
the page saves it, the API sends it as the final message (or in the closing chunk's ``hearth`` field when
streaming), the terminal prints what was changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from app.services.answering.documents_prompt import DocumentsTurn, assemble, replayed_cut
from app.services.answering.history import fit_history, prompt_budget
from app.services.answering.naming import name_pointed_answer
from app.services.answering.sources import FoundSources, find_sources
from app.services.library.documents import DocumentServices
from app.services.serving.model_handles import Lease
from backends.base import CancelToken, ChatEvent, ChatMessage, Finished, GenerationParams, TextDelta
from rag.attachments import ReadAttachment
from rag.citations import Moved, check_citations
from rag.naming import Named
from rag.prompt import Source, continue_numbering, rag_question, rag_system_prompt
from rag.prompt_echo import NOT_ANSWERED, taken_off
from rag.support import Unsupported, not_found_answer, unsupported


@dataclass(frozen=True)
class DocumentsQuestion:
    """What a front end asks: the question as the user wrote it and where its answer may come from."""

    question: str
    system_prompt: str  # the user's own; the document rules are put in front of it
    collection: str | None
    top_k: int
    attached: Sequence[ReadAttachment] = ()


@dataclass(frozen=True)
class TurnPrompt:
    """The prompt of one turn from documents, and what it was built from."""

    messages: tuple[ChatMessage, ...]
    prompt_tokens: int
    dropped_messages: int  # earlier messages left out to fit
    found: FoundSources
    question: str  # as the user wrote it, before the passages were put around it

    @property
    def sources(self) -> tuple[Source, ...]:
        return self.found.sources


@dataclass(frozen=True)
class FinalAnswer:
    """The answer as it is kept and shown once complete."""

    text: str
    named: Named | None = None  # the name a follow-up gave an answer that only pointed at a passage
    moved: tuple[Moved, ...] = ()  # citations moved to the passage that holds their claim
    unsupported: Unsupported | None = None  # no passage holds any of its terms: said so, its citations taken off
    echo: str = ""  # what was said of the prompt the model wrote back (rag.prompt_echo), when it did

    @property
    def notes(self) -> tuple[str, ...]:
        """What was changed, in words, for a front end that already showed the answer as written."""
        echo = (self.echo,) if self.echo else ()
        named = (self.named.words,) if self.named is not None else ()
        found = (self.unsupported.words,) if self.unsupported is not None else ()
        return (*echo, *named, *(m.words for m in self.moved), *found)


class _Finder:
    """Finds the passages for a question of this turn (and, for the API, of the earlier ones again)."""

    def __init__(
        self, documents: DocumentServices, engine: Lease, asked: DocumentsQuestion, params: GenerationParams
    ) -> None:
        self.system_prompt = rag_system_prompt(asked.system_prompt)
        self._documents, self._engine, self._asked, self._params = documents, engine, asked, params

    def __call__(self, question: str, previous: str | None = None, files: Sequence[str] = ()) -> FoundSources:
        """The passages for ``question``; ``previous``: the question the conversation asked before it."""
        asked = self._asked
        return find_sources(
            self._documents,
            self._engine,
            asked.collection,
            question,
            self.system_prompt,
            self._params,
            asked.top_k,
            asked.attached,
            previous,
            files,
        )


def documents_turn(
    documents: DocumentServices,
    engine: Lease,
    asked: DocumentsQuestion,
    params: GenerationParams,
    earlier: Sequence[DocumentsTurn] = (),
    keep_from: int | None = None,
    after: Sequence[ChatMessage] = (),
) -> TurnPrompt:
    """The prompt for ``asked`` after the ``earlier`` turns (each with the passages it was given). ``keep_from``:
    the first turn the conversation's previous prompt kept; None works it out again from the turns (a client that
    sends its whole history each time). ``after``: messages the client put after the question, kept as they are."""
    finder = _Finder(documents, engine, asked, params)
    return _assembled(finder, engine, asked, params, earlier, keep_from, after)


def refound_turns(
    documents: DocumentServices,
    engine: Lease,
    asked: DocumentsQuestion,
    params: GenerationParams,
    pairs: Sequence[tuple[str, str]],
) -> list[DocumentsTurn]:
    """Earlier (question, answer) pairs a client sent without the passages Hearth gave them, with those passages
    found again (same index, same question: the same passages), numbered across the conversation. The prompt is then
    the one the client's previous request had, plus this turn, and the engine's cache of it is used."""
    finder = _Finder(documents, engine, asked, params)
    turns: list[DocumentsTurn] = []
    shown: list[Source] = []
    for index, (question, answer) in enumerate(pairs):
        files = [s.path for s in turns[-1].sources] if turns else []
        numbered = continue_numbering(finder(question, pairs[index - 1][0] if index else None, files).sources, shown)
        shown.extend(numbered)
        turns.append(DocumentsTurn(question, numbered, answer))
    return turns


def loose_turn(
    documents: DocumentServices,
    engine: Lease,
    asked: DocumentsQuestion,
    params: GenerationParams,
    before: Sequence[ChatMessage],
    after: Sequence[ChatMessage] = (),
) -> TurnPrompt:
    """The prompt for a client history that is not question, answer, question, …: its messages as they are, the
    passages only in the last question, the oldest messages left out to fit."""
    finder = _Finder(documents, engine, asked, params)
    asked_before = [m.content for m in before if m.role == "user"]
    found = finder(asked.question, asked_before[-1] if asked_before else None)
    question = ChatMessage("user", rag_question(asked.question, found.sources))
    history = [ChatMessage("system", finder.system_prompt), *before, question, *after]
    budget = prompt_budget(engine.context_length, params.max_new_tokens)
    fitted = fit_history(history, budget, engine.count_chat_tokens)
    return TurnPrompt(tuple(fitted.messages), fitted.prompt_tokens, fitted.dropped, found, asked.question)


def _assembled(
    finder: _Finder,
    engine: Lease,
    asked: DocumentsQuestion,
    params: GenerationParams,
    earlier: Sequence[DocumentsTurn],
    keep_from: int | None,
    after: Sequence[ChatMessage],
) -> TurnPrompt:
    before = earlier[-1] if earlier else None
    found = finder(
        asked.question, before.question if before else None, [s.path for s in before.sources] if before else ()
    )
    shown = [s for turn in earlier for s in turn.sources]
    found = dataclasses.replace(found, sources=continue_numbering(found.sources, shown))
    turns = [*earlier, DocumentsTurn(asked.question, found.sources)]
    budget = prompt_budget(engine.context_length, params.max_new_tokens)
    count = engine.count_chat_tokens
    if keep_from is None:
        keep_from = replayed_cut(finder.system_prompt, turns, budget, count)
    built = assemble(finder.system_prompt, turns, budget, count, keep_from)
    messages = (*built.messages, *after)
    tokens = built.prompt_tokens if not after else count(messages)
    return TurnPrompt(messages, tokens, built.dropped_messages, found, asked.question)


def final_answer(
    engine: Lease,
    prompt: TurnPrompt,
    written: str,
    complete: bool,
    params: GenerationParams,
    cancel: CancelToken,
) -> FinalAnswer:
    """The answer as kept: named when it only pointed at a passage (asked only of a ``complete`` answer, one that
    ended by itself), then each citation on a passage that holds its claim, or said to be unsupported when no
    passage holds any of its terms. Without passages: as written."""
    if not prompt.sources:
        return FinalAnswer(written)
    text, echo = taken_off(written, prompt.question)
    if echo == NOT_ANSWERED:
        return FinalAnswer(text, echo=echo)
    named = None
    if complete:
        named = name_pointed_answer(engine, prompt.messages, text, prompt.question, prompt.sources, params, cancel)
    return dataclasses.replace(_checked(prompt, named.text if named is not None else text, named), echo=echo)


def streamed_answer(
    engine: Lease, prompt: TurnPrompt, params: GenerationParams, cancel: CancelToken
) -> Generator[ChatEvent, None, FinalAnswer]:
    """Streams the answer to ``prompt`` as the engine writes it, then returns it finished (``final_answer``): for a
    front end that shows the words as they come and the kept answer after them (``hearth ask``, the API)."""
    written: list[str] = []
    complete = False
    for event in engine.stream_chat(prompt.messages, params, cancel):
        if isinstance(event, TextDelta):
            written.append(event.text)
        elif isinstance(event, Finished):
            complete = event.reason == "stop"
        yield event
    return final_answer(engine, prompt, "".join(written), complete, params, cancel)


def checked_only(prompt: TurnPrompt, written: str) -> FinalAnswer:
    """The answer with its citations checked and no follow-up asked (an answer cut short, or the model gone)."""
    if not prompt.sources:
        return FinalAnswer(written)
    text, echo = taken_off(written, prompt.question)
    if echo == NOT_ANSWERED:
        return FinalAnswer(text, echo=echo)
    return dataclasses.replace(_checked(prompt, text, None), echo=echo)


def _checked(prompt: TurnPrompt, text: str, named: Named | None) -> FinalAnswer:
    found = unsupported(text, prompt.question, prompt.sources)
    if found is not None:
        return FinalAnswer(not_found_answer(text, found), named, (), found)
    checked = check_citations(text, prompt.question, prompt.sources)
    return FinalAnswer(checked.text, named, checked.moved)
