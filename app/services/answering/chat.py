"""Chat: store the question, fit the history, stream the answer, store the answer.

The service yields the backend's typed events, framed by :class:`TurnStarted` and :class:`TurnSaved`; turning
them into text on a screen is the caller's job (``app/ui`` accumulates them for Gradio, the CLI prints them).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.services.answering.attachment_plan import AttachmentUse
from app.services.answering.documents_prompt import DocumentsTurn
from app.services.answering.documents_turn import (
    DocumentsQuestion,
    FinalAnswer,
    TurnPrompt,
    checked_only,
    documents_turn,
    final_answer,
)
from app.services.answering.drafts import DRAFT_EVERY_S, INTERRUPTED, DraftSchedule
from app.services.answering.history import fit_history, prompt_budget
from app.services.answering.tool_turn import CallLog, ToolUse, fitted_stream
from app.services.answering.turn_settings import TurnSettings
from app.services.library.attachment_store import MAX_ATTACHMENTS, AttachmentStore, AttachmentSummary
from app.services.library.conversations import AnswerStats, Conversation, ConversationStore, StoredMessage, ToolRecord
from app.services.serving.model_handles import Lease
from app.services.serving.runtime import ModelRuntime
from app.tools.documents_tool import DocumentSearch
from app.tools.loop import CallAsked, CallDone, LoopNote, answer_with_tools
from backends.base import (
    AdapterUse,
    CancelToken,
    ChatEvent,
    ChatMessage,
    Finished,
    GenerationParams,
    TextDelta,
    Usage,
)
from models.shared.errors import EmptyMessage, HearthError
from rag.attachments import AttachProgress, ReadAttachment
from rag.prompt import Source, shown_text

if TYPE_CHECKING:
    from app.services.library.documents import DocumentServices

DEFAULT_TOP_K = 3
# From this many prompt tokens on, the wait before the first word is said in words (TurnStarted.reading).
READING_SAID_FROM_TOKENS = 1_000


@dataclass(frozen=True)
class TurnStarted:
    conversation_id: str
    dropped_messages: int
    prompt_tokens: int
    sources: tuple[Source, ...] = ()
    retrieve_ms: float = 0.0  # embedding the question plus searching, when answering from a collection
    embed_ms: float = 0.0  # the embedding part of retrieve_ms
    attachments: tuple[AttachmentUse, ...] = ()  # how each file attached to the conversation was used
    # How many passages the conversation's earlier answers numbered: this answer's new ones are numbered after them,
    # and one an earlier answer was given keeps its number (at most this).
    earlier_sources: int = 0

    @property
    def reading(self) -> str:
        """What the model reads before its first word, in words, when the prompt is long enough for the wait to
        show ("" otherwise): on a laptop CPU a model reads a few hundred tokens a second."""
        if self.prompt_tokens < READING_SAID_FROM_TOKENS:
            return ""
        return f"Reading {self.read_words} ({self.prompt_tokens:,} tokens) before answering…"

    @property
    def read_words(self) -> str:
        """What the prompt holds, in words: "your question, your file and 3 passages"."""
        parts = ["your question"]
        if self.attachments:
            parts.append("your files" if len(self.attachments) > 1 else "your file")
        if self.sources:
            count = len(self.sources)
            parts.append(f"{count} passage{'s' if count != 1 else ''}")
        if self.dropped_messages or len(parts) == 1:
            parts.append("the conversation")
        return ", ".join(parts[:-1]) + f" and {parts[-1]}"


class AttachmentRefused(HearthError):
    """A file given with a message could not be attached; nothing of the message was kept."""


@dataclass(frozen=True)
class TurnSaved:
    message: StoredMessage
    # What the answer as kept changed from the answer as streamed, in words ("Citation corrected: …"), for a front
    # end that showed it as it was written.
    notes: tuple[str, ...] = ()


TurnEvent = AttachProgress | TurnStarted | ChatEvent | CallAsked | CallDone | LoopNote | TurnSaved
TOOLS_TOO_LONG = "Start a new chat, or ask with tools off: the results of the calls take the room the answer needs."


@dataclass(frozen=True)
class _Prompt:
    messages: list[ChatMessage]
    dropped: int
    tokens: int
    documents: TurnPrompt | None = None  # the turn from documents, when the answer comes from documents
    # The passages of the earlier turns the prompt repeats, in their order: cut where the turn that read them cut
    # them, so the conversation's cached tokens still match (``backends.llamacpp.caches.prompt_spans``)
    passages_before: tuple[str, ...] = ()
    earlier_sources: int = 0  # the highest source number the earlier turns used

    def started(self, conversation_id: str) -> TurnStarted:
        """The event that opens the answer to this prompt."""
        turn, head = self.documents, (conversation_id, self.dropped, self.tokens)
        if turn is None:
            return TurnStarted(*head)
        found = turn.found
        return TurnStarted(*head, turn.sources, found.total_ms, found.embed_ms, found.uses, self.earlier_sources)


class ChatService:
    def __init__(
        self,
        store: ConversationStore,
        runtime: ModelRuntime,
        documents: Callable[[], DocumentServices] | None = None,
        top_k: int = DEFAULT_TOP_K,
        draft_every_s: float = DRAFT_EVERY_S,
        keep_share: float | None = None,
    ) -> None:
        """``documents`` builds (once) what answering from a collection needs; plain chat never calls it. The
        answer being written is saved every ``draft_every_s``, so a kill loses at most that much of it. With a
        ``keep_share`` every turn keeps its passages' caches and joins them (``TurnSettings.keep_passages``),
        reading that share of each joined passage again."""
        self._keep_share = keep_share
        self._draft_every_s = draft_every_s
        self._store = store
        self._runtime = runtime
        self._documents = documents
        self._attachments = AttachmentStore(store.database)
        self._top_k = top_k
        self._answers = 0  # being generated now
        self._idle = threading.Condition()

    @property
    def answering(self) -> bool:
        """Whether an answer is being written now."""
        with self._idle:
            return self._answers > 0

    def send(
        self,
        conversation_id: str | None,
        text: str,
        settings: TurnSettings,
        cancel: CancelToken | None = None,
        attach: Sequence[Path] = (),
    ) -> Iterator[TurnEvent]:
        """Answer ``text``; with a collection in ``settings``, from the passages retrieved for it, cited by number;
        files attached to the conversation (before, or now with ``attach``) are given whole or searched too. With
        tools, the model may call them, each call asked about as they say, and the calls are kept with the answer.
        The model is held (leased) from the first event to the last; ``cancel`` stops this answer only (and the
        attaching before it, which then keeps nothing)."""
        if not text.strip():
            raise EmptyMessage("There is nothing to send.", "Type a question first.")
        cancel = cancel or CancelToken()
        with self._runtime.lease() as engine:
            conversation = self._store.get(conversation_id) if conversation_id else None
            attached = [a.file for a in self._attachments.load(conversation.id)] if conversation else []
            if len(attached) + len(attach) > MAX_ATTACHMENTS:
                raise AttachmentRefused(
                    f"A conversation holds at most {MAX_ATTACHMENTS} files; this one would hold "
                    f"{len(attached) + len(attach)}.",
                    "Start a new chat for these files, or add them to a collection instead.",
                )
            new = yield from self._read(attach, cancel)
            if new is None:
                return  # cancelled while reading: nothing was kept
            known = {f.sha256 for f in attached}
            attached += [f for f in new if f.sha256 not in known]
            # Retrieve and fit before storing: a question that cannot be answered must not land in the
            # conversation.
            earlier = conversation.messages if conversation else ()
            prompt = self._prompt(engine, earlier, text, settings, attached)
            if conversation is None:
                conversation = self._store.create(settings.system_prompt, collection=settings.collection)
            else:
                self._remember_settings(conversation, settings)
            for file in new:
                self._attachments.add(conversation.id, file)
            self._store.append(conversation.id, "user", text)
            yield from self._answer(engine, conversation.id, prompt, settings, cancel)

    def next_prompt(self, conversation_id: str | None, text: str, settings: TurnSettings) -> list[ChatMessage]:
        """The messages :meth:`send` would give the model for ``text`` next in the conversation (or a new one), the
        passages and the earlier turns as they would be; nothing is stored. Benchmarks give the very same prompt to
        another engine."""
        with self._runtime.lease() as engine:
            conversation = self._store.get(conversation_id) if conversation_id else None
            earlier = conversation.messages if conversation else ()
            attached = [a.file for a in self._attachments.load(conversation.id)] if conversation else []
            return self._prompt(engine, earlier, text, settings, attached).messages

    def regenerate(
        self, conversation_id: str, settings: TurnSettings, cancel: CancelToken | None = None
    ) -> Iterator[TurnEvent]:
        with self._runtime.lease() as engine:
            conversation = self._store.get(conversation_id)
            stored = list(conversation.messages)
            if stored and stored[-1].role == "assistant":
                stored.pop()
            if not stored:
                raise EmptyMessage("There is no question to answer again.", "Send a message first.")
            question = stored.pop()
            attached = [a.file for a in self._attachments.load(conversation.id)]
            prompt = self._prompt(engine, stored, question.content, settings, attached)
            self._remember_settings(conversation, settings)
            self._store.delete_trailing_assistant(conversation.id)
            yield from self._answer(engine, conversation.id, prompt, settings, cancel or CancelToken())

    def attachments(self, conversation_id: str) -> list[AttachmentSummary]:
        """The files attached to a conversation, oldest first."""
        return self._attachments.summaries(conversation_id)

    def _remember_settings(self, conversation: Conversation, settings: TurnSettings) -> None:
        """The conversation keeps the system prompt and collection it was last answered with."""
        if conversation.system_prompt != settings.system_prompt:
            self._store.set_system_prompt(conversation.id, settings.system_prompt)
        if conversation.collection != settings.collection:
            self._store.set_collection(conversation.id, settings.collection)

    def _prompt(
        self,
        engine: Lease,
        earlier: Sequence[StoredMessage],
        question: str,
        settings: TurnSettings,
        attached: Sequence[ReadAttachment] = (),
    ) -> _Prompt:
        params, system_prompt, collection = settings.params, settings.system_prompt, settings.collection
        if collection or attached:
            asked = DocumentsQuestion(question, system_prompt, collection, self._top_k, attached)
            # The turns the previous answer's prompt left out stay out (its cut is kept while it fits).
            last = next((m.stats for m in reversed(earlier) if m.role == "assistant" and m.stats), None)
            keep_from = last.dropped_messages // 2 if last else 0
            turns = stored_turns(earlier)
            turn = documents_turn(self._documents_now(), engine, asked, params, turns, keep_from)
            before = tuple(shown_text(source) for kept in turns[keep_from:] for source in kept.sources)
            numbered = max((source.number for kept in turns for source in kept.sources), default=0)
            return _Prompt(list(turn.messages), turn.dropped_messages, turn.prompt_tokens, turn, before, numbered)
        history = [*_as_messages(system_prompt, earlier), ChatMessage("user", question)]
        budget = prompt_budget(engine.context_length, params.max_new_tokens)
        fitted = fit_history(history, budget, engine.count_chat_tokens)
        return _Prompt(list(fitted.messages), fitted.dropped, fitted.prompt_tokens)

    def _documents_now(self) -> DocumentServices:
        if self._documents is None:
            raise RuntimeError("this chat service was built without documents")
        return self._documents()

    def _read(
        self, paths: Sequence[Path], cancel: CancelToken
    ) -> Generator[AttachProgress, None, list[ReadAttachment] | None]:
        """The files of ``paths`` read, split and embedded, yielding how far each has got; ``None`` if cancelled.
        One file that cannot be attached refuses them all, with its reason."""
        if not paths:
            return []
        from rag.attachments import read_attachment
        from rag.reading.reader import ReadCancelled
        from rag.reading.sections import Skipped

        documents = self._documents_now()
        reader = documents.attachment_reader
        files: list[ReadAttachment] = []
        for path in paths:
            try:
                file = yield from read_attachment(path, reader, documents.embedder, documents.max_file_bytes, cancel)
            except ReadCancelled:
                return None
            except Skipped as skipped:
                raise AttachmentRefused(
                    f"{path.name} was not attached: {skipped.reason}.",
                    "Nothing was sent. Attach a PDF, Word, HTML, Markdown, text or CSV file (or a text file without "
                    "an extension, such as LICENSE), or ask without it.",
                ) from None
            files.append(file)
        return files

    def _answer(
        self,
        engine: Lease,
        conversation_id: str,
        prompt: _Prompt,
        settings: TurnSettings,
        cancel: CancelToken,
    ) -> Iterator[TurnEvent]:
        turn, tools = prompt.documents, settings.tools
        sources = turn.sources if turn else ()
        params = _answer_params(settings, conversation_id, sources, prompt.passages_before, self._keep_share)
        retrieve_ms = turn.found.total_ms if turn else 0.0
        uses = turn.found.uses if turn else ()
        final: FinalAnswer | None = None
        parts: list[str] = []
        usage: Usage | None = None
        reason = "cancelled"  # if the consumer walks away mid-answer, keep what was written as cancelled
        draft: StoredMessage | None = None  # the answer as saved while it is written
        schedule = DraftSchedule(self._draft_every_s)
        log = CallLog()
        search = tools.search if tools is not None else None
        if search is not None:
            search.sources[:] = list(sources)  # what it finds is numbered on from the passages given
        tools = _fitting(tools, prompt)
        events = _answer_events(engine, prompt.messages, params, cancel, tools)
        with self._idle:
            self._answers += 1
        try:
            yield prompt.started(conversation_id)
            for event in events:
                log.take(event)
                if isinstance(event, TextDelta | CallDone):
                    if isinstance(event, TextDelta):
                        parts.append(event.text)
                    if schedule.due() or isinstance(event, CallDone):  # a call's result is kept as soon as it is in
                        draft = self._save_draft(
                            conversation_id,
                            draft,
                            "".join(parts),
                            dropped=prompt.dropped,
                            sources=sources,
                            retrieve_ms=retrieve_ms,
                            uses=uses,
                            calls=tuple(log.records),
                        )
                elif isinstance(event, Usage):
                    usage = event
                elif isinstance(event, Finished):
                    reason = event.reason
                yield event
            sources, turn = _with_found(sources, turn, search)
            if turn is not None:  # the answer as saved and shown once complete: named, its citations checked
                final = final_answer(engine, turn, "".join(parts), reason == "stop", params, cancel)
        except HearthError:
            reason = "error"
            raise
        finally:
            with self._idle:
                self._answers -= 1
                self._idle.notify_all()
            text = "".join(parts)
            sources, turn = _with_found(sources, turn, search)
            if turn is not None:  # cut short or failed: still no citation on a passage that does not say it
                text = (final or checked_only(turn, text)).text
            saved = self._save(
                conversation_id,
                text,
                usage,
                reason,
                prompt.dropped,
                sources,
                retrieve_ms,
                draft,
                uses,
                params.adapter,
                tuple(log.records),
            )
        if saved is not None:
            yield TurnSaved(saved, final.notes if final is not None else ())

    def _save_draft(
        self,
        conversation_id: str,
        draft: StoredMessage | None,
        text: str,
        dropped: int,
        sources: tuple[Source, ...],
        retrieve_ms: float,
        uses: tuple[AttachmentUse, ...] = (),
        calls: tuple[ToolRecord, ...] = (),
    ) -> StoredMessage:
        stats = AnswerStats(0, 0, 0.0, 0.0, INTERRUPTED, dropped, retrieve_ms, uses)
        if draft is None:
            return self._store.append(conversation_id, "assistant", text, stats, sources, calls)
        return self._store.update_answer(draft.id, text, stats, sources, calls)

    def _save(
        self,
        conversation_id: str,
        text: str,
        usage: Usage | None,
        reason: str,
        dropped: int,
        sources: tuple[Source, ...],
        retrieve_ms: float,
        draft: StoredMessage | None = None,
        uses: tuple[AttachmentUse, ...] = (),
        adapter: AdapterUse | None = None,
        calls: tuple[ToolRecord, ...] = (),
    ) -> StoredMessage | None:
        if not text and not calls and reason != "stop" and draft is None:
            return None
        stats = AnswerStats(
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            time_to_first_token_ms=usage.time_to_first_token_ms if usage else 0.0,
            decode_tokens_per_s=usage.decode_tokens_per_s if usage else 0.0,
            finish_reason=reason,
            dropped_messages=dropped,
            retrieve_ms=retrieve_ms,
            attachments=uses,
            adapter=adapter.words if adapter is not None else "",
        )
        if draft is not None:
            return self._store.update_answer(draft.id, text, stats, sources, calls)
        return self._store.append(conversation_id, "assistant", text, stats, sources, calls)


def _with_found(
    sources: tuple[Source, ...], turn: TurnPrompt | None, search: DocumentSearch | None
) -> tuple[tuple[Source, ...], TurnPrompt | None]:
    """The answer's sources with what search_documents found added after them (numbered on from them), and the
    turn whose citations are checked against all of them."""
    if search is None or len(search.sources) <= len(sources):
        return sources, turn
    found = tuple(search.sources)
    if turn is not None:
        turn = dataclasses.replace(turn, found=dataclasses.replace(turn.found, sources=found))
    return found, turn


def stored_turns(stored: Sequence[StoredMessage]) -> list[DocumentsTurn]:
    """A stored conversation as turns: each question with its answer and the passages that answer was given. A
    question left without an answer (it failed, or was stopped before a word) is left out."""
    turns = []
    for question, answer in itertools.pairwise(stored):
        if question.role == "user" and answer.role == "assistant":
            from_documents = bool(answer.sources) or bool(answer.stats and answer.stats.retrieve_ms)
            turns.append(DocumentsTurn(question.content, answer.sources, answer.content, from_documents))
    return turns


def _as_messages(system_prompt: str, stored: Sequence[StoredMessage]) -> list[ChatMessage]:
    system = [ChatMessage("system", system_prompt)] if system_prompt.strip() else []
    return [*system, *(ChatMessage(m.role, m.content) for m in stored)]


def _answer_params(
    settings: TurnSettings,
    conversation_id: str,
    sources: Sequence[Source],
    before: Sequence[str] = (),
    keep_share: float | None = None,
) -> GenerationParams:
    """The turn's generation settings, with the caches the engine saves marked as the conversation's own (deleted
    with it) and, when passages are kept (the turn's settings, or the service's ``keep_share`` of each joined
    passage read again), the passages named so that their caches are kept and joined: the earlier turns'
    (``before``) too, so the prompt is cut where those turns' prompts were and its tokens match theirs."""
    params = dataclasses.replace(settings.params, cache_owner=conversation_id)
    if keep_share is not None:
        params = dataclasses.replace(params, passage_recompute=keep_share)
    if (settings.keep_passages or keep_share is not None) and sources:
        params = dataclasses.replace(params, passages=(*before, *(shown_text(source) for source in sources)))
    return params


def _fitting(tools: ToolUse | None, prompt: _Prompt) -> ToolUse | None:
    """Only the tools that fit the question (with none, the loop answers without tools)."""
    return dataclasses.replace(tools, box=tools.for_request(_asked(prompt)), fits=None) if tools else None


def _asked(prompt: _Prompt) -> str:
    """The question as the user wrote it (without the passages a turn from documents puts around it)."""
    if prompt.documents is not None:
        return prompt.documents.question
    return next((m.content for m in reversed(prompt.messages) if m.role == "user"), "")


def _answer_events(
    engine: Lease, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken, tools: ToolUse | None
) -> Iterator[ChatEvent | CallAsked | CallDone | LoopNote]:
    """The answer as the engine writes it, or, with tools, as the tool loop runs it (calls asked, calls done)."""
    if tools is None:
        return engine.stream_chat(messages, params, cancel)
    stream = fitted_stream(engine, cancel, TOOLS_TOO_LONG)
    return answer_with_tools(
        stream, messages, params, tools.box, tools.ask, tools.consent, tools.max_calls, tools.first
    )
