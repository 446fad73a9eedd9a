"""The Chat tab's event handlers, bound to the app's services. Wiring only: the logic lives in the services, in
``render`` and in ``chat_controls``.

Each browser tab (Gradio session) writes at most one answer at a time. While it does, Send is disabled and Stop
enabled; a second request from that tab (Enter in the message box) is refused with a reason and the message stays
in the box. Opening another conversation or starting a new chat stops the answer first, so the answer never draws
over the conversation the user switched to.

A conversation answers from the collection stored with it; a new chat answers without documents until a collection
is picked for it. What the tab shows (the open conversation, or a new chat's pick) is kept in the browser, so a
reload shows the same conversation and collection again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import gradio as gr

from app.services.answering.chat import TurnEvent
from app.services.answering.tool_turn import ToolUse
from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services
from app.tools.consent import ConsentBook
from app.tools.documents_tool import DocumentSearch
from app.tools.loop import CallAsked, Decision, FirstAnswer
from app.tools.relevance import fitting_tools
from app.tools.servers import ServerBook
from app.tools.toolbox import tools_box
from app.ui.call_gate import CallGate
from app.ui.chat_controls import (
    NO_TOOLS,
    NOTHING_WAITING,
    STILL_WRITING,
    TOOLS_AUTO,
    TOOLS_FIRST,
    ChatControls,
    chat_controls,
)
from app.ui.documents import NO_COLLECTION, DocumentsPanel
from app.ui.errors import as_gradio_error
from app.ui.render import (
    AnswerView,
    answering_from,
    attached_files_markdown,
    call_question,
    chat_history,
    conversation_choices,
    shown_call_id,
    user_text,
)
from app.ui.safe_markdown import literal
from app.ui.status_line import page_status
from app.ui.streaming import BatchedStream
from app.ui.tab_answers import TabAnswers
from backends.base import CancelToken, GenerationParams, ToolSpec
from models.shared.errors import ConversationNotFound, EngineStopped, HearthError

# How often the page is redrawn while an answer streams; the model itself never waits for the page.
UPDATE_INTERVAL_S = 0.05
# A stream's outputs: the chat, the row that asks about a tool call and its question, the message box, the
# conversation id, the list and the notice, then the controls: Send, Stop, Regenerate, Delete, and the row that
# confirms a delete (hidden whenever the controls change).
CHAT_OUTPUTS = 7
CONTROL_OUTPUTS = 5
# The message box after a message was sent: no text, no files.
EMPTY_MESSAGE: dict[str, Any] = {"text": "", "files": []}
ATTACH_AGAIN = "Drop the file on the message box again, or pick it with the clip beside the box."
# What the browser keeps between reloads: the open conversation, or a new chat's collection.
REMEMBERED_DEFAULT: dict[str, str | None] = {"conversation": None, "collection": NO_COLLECTION}


class ChatPage:
    """Event handlers for the Chat tab and the conversation list."""

    def __init__(self, services: Services, documents: DocumentsPanel) -> None:
        self.services = services
        self.documents = documents
        self._tabs = TabAnswers()  # each browser tab writes one answer at a time and stops only its own
        self._calls = CallGate()  # the tool call each tab's answer waits on, until its buttons decide

    def stop(self, request: gr.Request) -> None:
        self._tabs.stop(_session(request))

    # --- tool calls -------------------------------------------------------------------------------------------
    def allow_once(self, question: str, request: gr.Request) -> None:
        self._decide("once", question, request)

    def allow_always(self, question: str, request: gr.Request) -> None:
        self._decide("always", question, request)

    def deny(self, question: str, request: gr.Request) -> None:
        self._decide("deny", question, request)

    def _decide(self, decision: Decision, question: str, request: gr.Request) -> None:
        """The user's word on the call shown beside the buttons (``question`` names it). The row is left to the
        answer's stream, which hides it as the call runs or is refused: this reply travels apart from the stream,
        and a late "hide" would hide the next call's question while it waits."""
        if self._calls.decide(_session(request), decision, shown_call_id(question)) is None:
            gr.Warning(NOTHING_WAITING)

    def _tool_use(
        self, mode: str | None, key: str, cancel: CancelToken, collection: str | None = None
    ) -> ToolUse | None:
        """The tools for this tab's answer, as the Tools choice says: the built-in ones (search_documents too when
        the chat has a collection) and those of the servers that are on (a server that cannot be listed is left out,
        and named); each call is asked about here."""
        if mode not in (TOOLS_AUTO, TOOLS_FIRST):
            return None
        paths, settings = self.services.paths, self.services.settings.tools
        search = None
        if collection and settings.search_documents:
            documents = self.services.documents.get()
            search = DocumentSearch(collection, documents.retriever.search, self.services.settings.rag.top_k)
        box = tools_box(
            ServerBook(paths.mcp_servers_file).entries(),
            settings.call_timeout_s,
            [search.offered()] if search is not None else [],
            calculator=settings.calculator,
            cancel=cancel,
        )
        if not box.offered:
            gr.Warning(NO_TOOLS, title="No tool is on")
        for problem in box.problems:
            gr.Warning(problem, title="A tool server is left out")

        def ask(asked: CallAsked) -> Decision:
            return self._calls.ask(key, asked, cancel)

        def fits(request: str, tools: Sequence[ToolSpec]) -> Sequence[ToolSpec]:
            embedder = self.services.documents.get().embedder
            return fitting_tools(embedder, request, tools, settings.fit_threshold)

        first: FirstAnswer = "call" if mode == TOOLS_FIRST else "auto"
        return ToolUse(box, ask, ConsentBook(paths.tool_consent_file), settings.max_calls, first, search, fits)

    # --- controls -----------------------------------------------------------------------------------------
    def controls(self, conversation_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        """Send, Stop, Regenerate, Delete and the delete confirmation, as this tab's state says."""
        return _control_updates(chat_controls(self._tabs.writing(_session(request)), bool(conversation_id)))

    # --- page load and the conversation list --------------------------------------------------------------
    def params(
        self, temperature: float, max_new_tokens: float, conversation_id: str | None, collection: str | None
    ) -> GenerationParams:
        """The configured defaults with the page's two sliders applied, and the adapter attached for this
        conversation or collection (or every answer), if any."""
        chosen = self.services.generation_params(conversation_id=conversation_id, collection=collection)
        # The engine says how far it has read a long prompt; the answer shows it until the first word.
        return dataclasses.replace(
            chosen, temperature=float(temperature), max_new_tokens=int(max_new_tokens), report_reading=True
        )

    def sidebar(self, selected: str | None) -> Any:
        try:
            summaries = self.services.store.list()
        except HearthError as exc:  # a damaged conversation database: say so, and keep the page usable
            gr.Warning(exc.for_page, title="Conversations unavailable")
            return gr.update(choices=[], value=None)
        return gr.update(choices=conversation_choices(summaries), value=selected)

    def on_load(self, remembered: dict[str, Any] | None) -> tuple[Any, ...]:
        """The list, the status, and what the tab showed before a reload: its conversation (with the collection
        stored with it), or a new chat with the collection picked for it."""
        remembered = remembered if isinstance(remembered, dict) else {}
        default_prompt = self.services.settings.generation.system_prompt
        shown: tuple[Any, ...] = ([], None, default_prompt, _text(remembered.get("collection")))
        conversation_id = _text(remembered.get("conversation"))
        if conversation_id:
            try:
                conversation = self.services.store.get(conversation_id)
            except HearthError:  # deleted since, or the database is damaged (the list says so): a new chat
                conversation_id = ""
            else:
                shown = (
                    chat_history(conversation),
                    conversation.id,
                    conversation.system_prompt,
                    conversation.collection or NO_COLLECTION,
                )
        return (self.sidebar(conversation_id or None), *self.on_tick(), *shown)

    def documents_view(self, chat_collection: str | None) -> tuple[Any, ...]:
        """The Documents tab's first view; the chat keeps the collection it shows if that still exists."""
        return self.documents.refresh(None, chat_collection or NO_COLLECTION)

    def on_tick(self) -> tuple[Any, ...]:
        """The status line, and while a model loads, the way out of it (and the timer that keeps both fresh)."""
        status = self.services.runtime.status
        loading = status.state == "loading" or bool(status.pending)
        return (
            page_status(self.services),
            gr.update(visible=loading),
            gr.update(active=loading or status.state == "restarting"),
        )

    def cancel_load(self) -> str:
        if self.services.control.cancel_load():
            return "Cancelling the load…"
        return ""

    def open_conversation(self, conversation_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        """Show a saved conversation with its collection (outputs: chat, id, system prompt, notice, collection)."""
        if not conversation_id:
            return gr.update(), gr.update(), gr.update(), "", gr.update()
        self._tabs.stop_and_wait(_session(request))
        try:
            conversation = self.services.store.get(conversation_id)
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        notice = ""
        collection = conversation.collection or NO_COLLECTION
        if collection and collection not in {value for _, value in self.documents.chat_choices()}:
            notice = (
                f"This chat answered from {literal(collection)}, which no longer exists: it now answers without "
                "documents."
            )
            collection = NO_COLLECTION
        return chat_history(conversation), conversation.id, conversation.system_prompt, notice, collection

    def new_chat(self, request: gr.Request) -> tuple[Any, ...]:
        """An empty chat that answers without documents (outputs: chat, id, list, system prompt, notice,
        collection)."""
        self._tabs.stop_and_wait(_session(request))
        prompt = self.services.settings.generation.system_prompt
        return [], None, self.sidebar(None), prompt, "", NO_COLLECTION

    def choose_collection(self, conversation_id: str | None, collection: str | None) -> None:
        """The user picked a collection: an open conversation stores it at once (a new chat keeps it in the
        browser until its first message creates the conversation)."""
        if not conversation_id:
            return
        try:
            self.services.store.set_collection(conversation_id, collection or None)
        except ConversationNotFound:
            return  # deleted in another tab; its next message says so
        except HearthError as exc:
            gr.Warning(exc.for_page, title="The choice was not saved")

    def collection_changed(self, conversation_id: str | None, collection: str | None) -> tuple[Any, ...]:
        """The line above the chat, and what the browser keeps for a reload."""
        return answering_from(collection), remember(conversation_id, collection)

    def delete_conversation(self, conversation_id: str | None) -> tuple[Any, ...]:
        if conversation_id:
            try:
                self.services.delete_conversation(conversation_id)
            except HearthError as exc:
                raise as_gradio_error(exc) from exc
        return [], None, self.sidebar(None), "", NO_COLLECTION

    # --- answers ------------------------------------------------------------------------------------------
    def files_line(self, conversation_id: str | None) -> str:
        """The files attached to the open conversation, each with how the last answer used it."""
        if not conversation_id:
            return ""
        try:
            files = self.services.chat.attachments(conversation_id)
            conversation = self.services.store.get(conversation_id)
        except HearthError:
            return ""  # deleted, or the database is damaged (the list says so)
        answers = [m for m in conversation.messages if m.role == "assistant" and m.stats is not None]
        uses = answers[-1].stats.attachments if answers and answers[-1].stats else ()
        return attached_files_markdown(files, uses)

    def send(
        self,
        message: dict[str, Any] | str | None,
        conversation_id: str | None,
        system_prompt: str,
        temperature: float,
        max_new_tokens: float,
        collection: str | None,
        tools: str | None,
        request: gr.Request,
    ) -> Iterator[tuple[Any, ...]]:
        text, uploaded = message_parts(message)
        if not text.strip():
            gr.Warning("Type a question about the file first." if uploaded else "Type a question first.")
            yield _unchanged(CHAT_OUTPUTS + CONTROL_OUTPUTS)  # a generator that yields nothing empties its outputs
            return
        try:
            files = self.documents.uploads.checked(uploaded, remedy=ATTACH_AGAIN)
        except HearthError as exc:
            raise as_gradio_error(exc) from exc

        def start(cancel: CancelToken) -> tuple[Iterator[TurnEvent], list[dict[str, str]]]:
            history = self._history(conversation_id)
            history.append({"role": "user", "content": user_text(text)})
            settings = self._turn_settings(
                conversation_id, system_prompt, temperature, max_new_tokens, collection, tools, request, cancel
            )
            events = self.services.chat.send(conversation_id, text, settings, cancel=cancel, attach=files)
            return events, history

        open_ = bool(conversation_id)
        yield from self._answer(request, chat_controls(True, open_), chat_controls(False, open_), start, True)

    def regenerate(
        self,
        conversation_id: str | None,
        system_prompt: str,
        temperature: float,
        max_new_tokens: float,
        collection: str | None,
        tools: str | None,
        request: gr.Request,
    ) -> Iterator[tuple[Any, ...]]:
        if not conversation_id:
            gr.Warning("There is nothing to regenerate yet.")
            yield _unchanged(CHAT_OUTPUTS + CONTROL_OUTPUTS)
            return

        def start(cancel: CancelToken) -> tuple[Iterator[TurnEvent], list[dict[str, str]]]:
            history = self._history(conversation_id)
            if history and history[-1]["role"] == "assistant":
                history.pop()
            settings = self._turn_settings(
                conversation_id, system_prompt, temperature, max_new_tokens, collection, tools, request, cancel
            )
            events = self.services.chat.regenerate(conversation_id, settings, cancel=cancel)
            return events, history

        yield from self._answer(request, chat_controls(True, True), chat_controls(False, True), start, False)

    def _turn_settings(
        self,
        conversation_id: str | None,
        system_prompt: str,
        temperature: float,
        max_new_tokens: float,
        collection: str | None,
        tools: str | None,
        request: gr.Request,
        cancel: CancelToken,
    ) -> TurnSettings:
        """The turn's settings from the page's inputs (an empty collection choice is no collection)."""
        chosen = collection or None
        params = self.params(temperature, max_new_tokens, conversation_id, chosen)
        use = self._tool_use(tools, _session(request), cancel, chosen)
        return TurnSettings(params, system_prompt, collection=chosen, tools=use)

    def _answer(
        self,
        request: gr.Request,
        writing: ChatControls,
        idle: ChatControls,
        start: Callable[[CancelToken], tuple[Iterator[TurnEvent], list[dict[str, str]]]],
        clear_box: bool,
    ) -> Iterator[tuple[Any, ...]]:
        """One answer for this browser session at a time: the controls switch to ``writing``, ``start`` begins the
        turn with the session's cancel token, and the answer streams until it ends or Stop is pressed; however it
        ends, the controls are left ``idle``."""
        key = _session(request)
        cancel = self._tabs.claim(key)
        if cancel is None:
            gr.Warning(STILL_WRITING)
            yield _unchanged(CHAT_OUTPUTS + CONTROL_OUTPUTS)
            return
        try:
            yield (*_unchanged(CHAT_OUTPUTS), *_control_updates(writing))
            events, history = start(cancel)
            if not (yield from self._stream(events, history, clear_box=clear_box, cancel=cancel)):
                yield (*_unchanged(CHAT_OUTPUTS), *_control_updates(idle))
        except Exception:
            # Refused or failed before the answer ended (the model restarting, a bad request): the message the
            # error shows says why, and the controls go back to idle so the user can send again.
            yield (gr.skip(), *_call_updates(None), *_unchanged(CHAT_OUTPUTS - 3), *_control_updates(idle))
            raise
        finally:
            self._tabs.release(key)

    def _history(self, conversation_id: str | None) -> list[dict[str, str]]:
        if not conversation_id:
            return []
        try:
            return chat_history(self.services.store.get(conversation_id))
        except HearthError as exc:
            raise as_gradio_error(exc) from exc

    def _stream(
        self, events: Iterator[TurnEvent], history: list[dict[str, str]], clear_box: bool, cancel: CancelToken
    ) -> Generator[tuple[Any, ...], None, bool]:
        """Outputs: chat, the tool call row and its question, message box, conversation id, list, notice, then the
        controls. Returns whether the last output set the controls back to idle (False when the turn produced
        nothing)."""
        view = AnswerView(history)
        batches = BatchedStream(events, UPDATE_INTERVAL_S, on_abandon=cancel.cancel).batches()
        produced = False
        began = False
        shown: CallAsked | None = None  # the call the row asks about now
        try:
            # The turn begins only after the files are attached, the question validated and the history fitted:
            # errors raised before leave the typed message (and its files) in the box and the conversation untouched.
            for batch in batches:
                produced = True
                for event in batch:
                    view.apply(event)
                call = _unchanged(2) if view.asking is shown else _call_updates(view.asking)
                shown = view.asking
                if began or view.conversation_id is None:
                    yield view.render(), *call, *_unchanged(CHAT_OUTPUTS - 3 + CONTROL_OUTPUTS)
                    continue
                began = True
                for notice in view.notices:
                    gr.Info(notice)
                yield (
                    view.render(),
                    *call,
                    EMPTY_MESSAGE if clear_box else gr.skip(),
                    view.conversation_id,
                    self.sidebar(view.conversation_id),
                    _notice(view),
                    *_control_updates(chat_controls(True, True)),
                )
            if not produced:
                return False
        except EngineStopped as exc:
            if view.conversation_id is None:
                raise as_gradio_error(exc) from exc
            # The answer began: keep it on screen, say what happened under it (it is saved as it stands).
            view.interrupt(exc.for_page)
            gr.Warning(exc.message, title="The model stopped")
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        if not began:  # stopped while a file was being attached: nothing was kept, the message is still in the box
            view.interrupt("Stopped while attaching: nothing was sent or kept. The message is still in the box.")
            yield view.render(), *_call_updates(None), *_unchanged(CHAT_OUTPUTS - 3 + CONTROL_OUTPUTS)
            return False
        idle = chat_controls(False, view.conversation_id is not None)
        yield (
            view.render(),
            *_call_updates(None),
            gr.skip(),
            view.conversation_id,
            self.sidebar(view.conversation_id),
            _notice(view),
            *_control_updates(idle),
        )
        return True


def message_parts(message: dict[str, Any] | str | None) -> tuple[str, list[str]]:
    """The text and the uploaded files' paths of the message box's value (a plain string from a client that
    sends only text)."""
    if isinstance(message, str):
        return message, []
    if not isinstance(message, dict):
        return "", []
    text = message.get("text")
    files = message.get("files") or []
    paths = [f if isinstance(f, str) else f.get("path", "") if isinstance(f, dict) else "" for f in files]
    return (text if isinstance(text, str) else ""), [p for p in paths if p]


def _control_updates(controls: ChatControls) -> tuple[Any, ...]:
    return (
        gr.update(interactive=controls.send),
        gr.update(interactive=controls.stop),
        gr.update(interactive=controls.regenerate),
        gr.update(interactive=controls.delete),
        gr.update(visible=False),
    )


def _call_updates(asking: CallAsked | None) -> tuple[Any, Any]:
    """The row that asks about a tool call, shown with its question while one waits, hidden otherwise."""
    return gr.update(visible=asking is not None), call_question(asking)


def _unchanged(count: int) -> tuple[Any, ...]:
    return tuple(gr.skip() for _ in range(count))


def remember(conversation_id: str | None, collection: str | None) -> dict[str, str | None]:
    """What the browser keeps for a reload: the open conversation (its collection is stored with it), or a new
    chat's collection."""
    return {"conversation": conversation_id or None, "collection": collection or NO_COLLECTION}


def _session(request: gr.Request | None) -> str:
    return (request.session_hash if request is not None else None) or ""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _notice(view: AnswerView) -> str:
    return " ".join(view.notices)
