"""The Gradio page. Wiring only: the logic lives in the services and in ``render``."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.api.server import RunningServer, start_server
from app.errors import EngineStopped, HearthError
from app.services.chat import TurnEvent
from app.services.container import Services
from app.ui.api_panel import api_section
from app.ui.document_text import TABLE_HEADERS
from app.ui.documents import NO_COLLECTION, DocumentsPanel
from app.ui.errors import as_gradio_error
from app.ui.hardware import HardwarePanel
from app.ui.hardware_view import BACKEND_CHOICES
from app.ui.models_tab import ModelsPanel
from app.ui.models_view import LADDER_HEADERS, MODEL_HEADERS
from app.ui.render import (
    AnswerView,
    chat_history,
    conversation_choices,
    status_markdown,
    upload_limit_note,
    user_text,
)
from app.ui.streaming import BatchedStream
from backends.base import CancelSlot, CancelToken, GenerationParams
from models.quantize import TYPES as QUANT_TYPES

log = logging.getLogger(__name__)

# How often the page is redrawn while an answer streams; the model itself never waits for the page.
UPDATE_INTERVAL_S = 0.05
# Answers the page streams at once, across all tabs; beyond the engine's slots they wait there, in order.
PARALLEL_ANSWERS = 16

CSS = """
#status-line { font-size: 0.9em; }
#notice { color: var(--body-text-color-subdued); font-size: 0.85em; min-height: 1em; }
footer { display: none !important; }
"""


class ChatPage:
    """Event handlers for one Gradio page, bound to the app's services."""

    def __init__(self, services: Services, documents: DocumentsPanel) -> None:
        self.services = services
        self.documents = documents
        # Each browser tab stops only its own answer: one cancel slot per Gradio session.
        self._answers: dict[str, CancelSlot] = {}
        self._answers_lock = threading.Lock()

    def _slot(self, request: gr.Request | None) -> CancelSlot:
        key = (request.session_hash if request is not None else None) or ""
        with self._answers_lock:
            return self._answers.setdefault(key, CancelSlot())

    def params(self, temperature: float, max_new_tokens: float) -> GenerationParams:
        """The configured defaults with the page's two sliders applied."""
        return dataclasses.replace(
            self.services.generation_params(), temperature=float(temperature), max_new_tokens=int(max_new_tokens)
        )

    def sidebar(self, selected: str | None) -> Any:
        try:
            summaries = self.services.store.list()
        except HearthError as exc:  # a damaged conversation database: say so, and keep the page usable
            gr.Warning(f"{exc.message} {exc.remedy}", title="Conversations unavailable")
            return gr.update(choices=[], value=None)
        return gr.update(choices=conversation_choices(summaries), value=selected)

    def on_load(self) -> tuple[Any, ...]:
        return self.sidebar(None), *self.on_tick()

    def on_tick(self) -> tuple[Any, ...]:
        """The status line, and while a model loads, the way out of it (and the timer that keeps both fresh)."""
        status = self.services.runtime.status
        loading = status.state == "loading" or bool(status.pending)
        return (
            status_markdown(status),
            gr.update(visible=loading),
            gr.update(active=loading or status.state == "restarting"),
        )

    def cancel_load(self) -> str:
        if self.services.control.cancel_load():
            return "Cancelling the load…"
        return ""

    def open_conversation(self, conversation_id: str | None) -> tuple[Any, ...]:
        if not conversation_id:
            return gr.update(), gr.update(), gr.update(), "", gr.update()
        try:
            conversation = self.services.store.get(conversation_id)
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        known = {value for _, value in self.documents.chat_choices()}
        collection = conversation.collection if conversation.collection in known else NO_COLLECTION
        return chat_history(conversation), conversation.id, conversation.system_prompt, "", collection

    def new_chat(self) -> tuple[Any, ...]:
        return [], None, self.sidebar(None), self.services.settings.generation.system_prompt, ""

    def delete_conversation(self, conversation_id: str | None) -> tuple[Any, ...]:
        if conversation_id:
            try:
                self.services.store.delete(conversation_id)
            except HearthError as exc:
                raise as_gradio_error(exc) from exc
        return [], None, self.sidebar(None), ""

    def stop(self, request: gr.Request) -> None:
        self._slot(request).cancel()

    def send(
        self,
        text: str,
        conversation_id: str | None,
        system_prompt: str,
        temperature: float,
        max_new_tokens: float,
        collection: str | None,
        request: gr.Request,
    ) -> Iterator[tuple[Any, ...]]:
        if not text.strip():
            gr.Warning("Type a question first.")
            return
        history = self._history(conversation_id)
        history.append({"role": "user", "content": user_text(text)})
        params = self.params(temperature, max_new_tokens)
        cancel = self._slot(request).start()
        events = self.services.chat.send(conversation_id, text, params, system_prompt, collection or None, cancel)
        yield from self._stream(events, history, clear_box=True, cancel=cancel)

    def regenerate(
        self,
        conversation_id: str | None,
        system_prompt: str,
        temperature: float,
        max_new_tokens: float,
        collection: str | None,
        request: gr.Request,
    ) -> Iterator[tuple[Any, ...]]:
        if not conversation_id:
            gr.Warning("There is nothing to regenerate yet.")
            return
        history = self._history(conversation_id)
        if history and history[-1]["role"] == "assistant":
            history.pop()
        params = self.params(temperature, max_new_tokens)
        cancel = self._slot(request).start()
        events = self.services.chat.regenerate(conversation_id, params, system_prompt, collection or None, cancel)
        yield from self._stream(events, history, clear_box=False, cancel=cancel)

    def _history(self, conversation_id: str | None) -> list[dict[str, str]]:
        if not conversation_id:
            return []
        try:
            return chat_history(self.services.store.get(conversation_id))
        except HearthError as exc:
            raise as_gradio_error(exc) from exc

    def _stream(
        self, events: Iterator[TurnEvent], history: list[dict[str, str]], clear_box: bool, cancel: CancelToken
    ) -> Iterator[tuple[Any, ...]]:
        view = AnswerView(history)
        batches = BatchedStream(events, UPDATE_INTERVAL_S, on_abandon=cancel.cancel).batches()
        try:
            # The first batch comes only after validation and history fitting: errors raised there leave the
            # typed message in the box and the conversation untouched.
            first = next(batches, None)
            if first is None:
                return
            for event in first:
                view.apply(event)
            for notice in view.notices:
                gr.Info(notice)
            box = "" if clear_box else gr.update()
            yield view.render(), box, view.conversation_id, self.sidebar(view.conversation_id), _notice(view)
            for batch in batches:
                for event in batch:
                    view.apply(event)
                yield view.render(), gr.update(), gr.update(), gr.update(), gr.update()
        except EngineStopped as exc:
            if view.conversation_id is None:
                raise as_gradio_error(exc) from exc
            # The answer began: keep it on screen, say what happened under it (it is saved as it stands).
            view.interrupt(f"{exc.message} {exc.remedy}")
            gr.Warning(exc.message, title="The model stopped")
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        yield view.render(), gr.update(), view.conversation_id, self.sidebar(view.conversation_id), _notice(view)


def _notice(view: AnswerView) -> str:
    return " ".join(view.notices)


def build_ui(services: Services) -> gr.Blocks:
    documents = DocumentsPanel(services)
    hardware = HardwarePanel(services)
    models_panel = ModelsPanel(services)
    page = ChatPage(services, documents)
    settings = services.settings.generation
    max_file_mb = services.settings.rag.max_file_mb  # the page's upload limit too (app.api.server)
    with gr.Blocks(title="Hearth", analytics_enabled=False, fill_height=True, delete_cache=(3600, 3600)) as demo:
        conversation_id = gr.State(None)
        with gr.Sidebar(label="Conversations", open=True):
            gr.Markdown("## Hearth\nYour private, offline assistant")
            new_button = gr.Button("New chat", variant="primary", elem_id="new-chat")
            conversations = gr.Radio(choices=[], label="Conversations", elem_id="conversation-list", interactive=True)
            delete_button = gr.Button("Delete this conversation", size="sm", elem_id="delete")
            with gr.Row(visible=False) as confirm_row:
                confirm_delete = gr.Button("Yes, delete it", size="sm", variant="stop", elem_id="confirm-delete")
                cancel_delete = gr.Button("Keep it", size="sm", elem_id="cancel-delete")
        with gr.Row(equal_height=True):
            status = gr.Markdown("Starting…", elem_id="status-line")
            cancel_load = gr.Button(
                "Cancel loading",
                variant="stop",
                size="sm",
                scale=0,
                min_width=140,
                visible=False,
                elem_id="cancel-load",
            )
        with gr.Tabs(elem_id="tabs"):
            with gr.Tab("Chat", id="chat-tab", elem_id="chat-tab"):
                chatbot = gr.Chatbot(
                    elem_id="chat",
                    label="Chat",
                    show_label=False,
                    scale=1,
                    height="60vh",
                    buttons=["copy"],
                    feedback_options=None,
                    # Messages arrive as safe_markdown's output: no raw HTML to keep, no custom tags to let through.
                    sanitize_html=True,
                    allow_tags=False,
                    # No LaTeX: Gradio cuts $$…$$ out of the raw message before reading Markdown, even across code,
                    # which would hand marked the inside of a code block as HTML.
                    latex_delimiters=[],
                    placeholder="Ask anything. Your words and the model's answers never leave this computer.",
                )
                notice = gr.Markdown("", elem_id="notice")
                with gr.Row(equal_height=True):
                    message = gr.Textbox(
                        placeholder="Type a message (Enter sends, Shift+Enter for a new line)",
                        show_label=False,
                        lines=1,
                        max_lines=8,
                        scale=8,
                        elem_id="message",
                        autofocus=True,
                    )
                    send_button = gr.Button("Send", variant="primary", scale=1, min_width=80, elem_id="send")
                    stop_button = gr.Button("Stop", variant="stop", scale=1, min_width=80, elem_id="stop")
                with gr.Row():
                    chat_collection = gr.Dropdown(
                        choices=[("None (plain chat)", NO_COLLECTION)],
                        value=NO_COLLECTION,
                        label="Answer from documents",
                        info="Pick a collection to answer from its files, with numbered sources.",
                        scale=3,
                        elem_id="chat-collection",
                        # The page's first refresh can land after a collection was just created; the name is
                        # checked on the server anyway, so a value the list does not show yet is no error.
                        allow_custom_value=True,
                        interactive=True,
                    )
                    with gr.Column(scale=1, min_width=160):
                        regenerate_button = gr.Button("Regenerate", size="sm", elem_id="regenerate")
                        clear_button = gr.Button("Clear (new chat)", size="sm", elem_id="clear")
                with gr.Accordion("Answer settings", open=False, elem_id="answer-settings"):
                    system_prompt = gr.Textbox(label="System prompt", value=settings.system_prompt, lines=3)
                    temperature = gr.Slider(
                        0.0, 2.0, value=settings.temperature, step=0.05, label="Temperature", elem_id="temperature"
                    )
                    max_new_tokens = gr.Slider(
                        16, 4096, value=min(settings.max_new_tokens, 4096), step=16, label="Max new tokens"
                    )
            with gr.Tab("Documents", id="documents-tab", elem_id="documents-tab"):
                gr.Markdown(
                    "A **collection** is a set of your files that Hearth can answer from. Files are read, split "
                    "into passages and indexed on this computer; pick the collection under the chat box to ask "
                    "about them."
                )
                with gr.Row(equal_height=True):
                    collection = gr.Dropdown(
                        choices=[],
                        label="Collection",
                        scale=3,
                        elem_id="collection",
                        interactive=True,
                        allow_custom_value=True,
                    )
                    new_name = gr.Textbox(
                        label="New collection", placeholder="for example: work notes", scale=3, elem_id="new-name"
                    )
                    create_button = gr.Button("Create", scale=1, elem_id="create-collection")
                summary = gr.Markdown("", elem_id="collection-summary")
                with gr.Row(equal_height=True):
                    upload = gr.File(
                        label=f"Add files (PDF, Word, HTML, Markdown, text, CSV) up to {max_file_mb} MB each",
                        file_count="multiple",
                        type="filepath",
                        scale=4,
                        elem_id="upload",
                        height=140,
                    )
                    folder_upload = gr.UploadButton(
                        "Add a folder", file_count="directory", scale=1, elem_id="upload-folder", size="md"
                    )
                gr.Markdown(upload_limit_note(max_file_mb), elem_id="upload-limit")
                with gr.Row(equal_height=True):
                    progress = gr.Markdown("", elem_id="ingest-progress")
                    cancel_button = gr.Button("Cancel", variant="stop", size="sm", visible=False, elem_id="cancel")
                table = gr.Dataframe(
                    headers=TABLE_HEADERS,
                    datatype=["str", "str", "number", "str"],
                    interactive=False,
                    wrap=True,
                    elem_id="files",
                    label="Files",
                )
                with gr.Row(equal_height=True):
                    file_picker = gr.Dropdown(
                        choices=[], label="File", scale=3, elem_id="file-picker", interactive=True
                    )
                    remove_button = gr.Button("Remove from collection", size="sm", scale=1, elem_id="remove-file")
                delete_collection_button = gr.Button(
                    "Delete this collection", size="sm", variant="secondary", elem_id="delete-collection"
                )
                with gr.Row(visible=False) as confirm_collection_row:
                    gr.Markdown("Delete the collection and its index? Files you added by path stay on disk.")
                    confirm_collection = gr.Button(
                        "Yes, delete it", size="sm", variant="stop", elem_id="confirm-delete-collection"
                    )
                    keep_collection = gr.Button("Keep it", size="sm", elem_id="keep-collection")
            with gr.Tab("Models", id="models-tab", elem_id="models-tab") as models_tab:
                gr.Markdown(
                    "Every model Hearth knows, and whether it fits this computer at the configured context. "
                    "Quantizing makes a smaller, faster copy that answers a little worse; the ladder measures "
                    "exactly how much, here."
                )
                models_table = gr.Dataframe(
                    headers=MODEL_HEADERS, interactive=False, wrap=True, elem_id="models-table", label="Models"
                )
                with gr.Row(equal_height=True):
                    model_pick = gr.Dropdown(choices=[], label="Model", scale=3, elem_id="model-pick")
                    use_button = gr.Button("Use for chat", variant="primary", scale=1, elem_id="use-model")
                    cancel_use = gr.Button("Cancel loading", variant="stop", scale=1, elem_id="cancel-use")
                    remove_model_button = gr.Button("Remove", scale=1, elem_id="remove-model")
                job_progress = gr.Markdown("", elem_id="job-progress")
                with gr.Accordion("Import a GGUF file", open=False, elem_id="import-accordion"):
                    with gr.Row(equal_height=True):
                        import_path = gr.Textbox(
                            label="Path on this computer",
                            placeholder="/home/me/models/model.Q4_K_M.gguf",
                            scale=3,
                            elem_id="import-path",
                        )
                        import_file = gr.File(
                            label=f"…or drop a .gguf of up to {max_file_mb} MB (bigger: type its path)",
                            file_types=[".gguf"],
                            scale=2,
                            elem_id="import-file",
                        )
                    import_button = gr.Button("Import (the file is checked first)", elem_id="import-model")
                with gr.Accordion("Quantize and compare", open=False, elem_id="quantize-accordion"):
                    with gr.Row(equal_height=True):
                        qtype = gr.Dropdown(
                            choices=list(QUANT_TYPES), value="Q4_K_M", label="Type", scale=2, elem_id="qtype"
                        )
                        allow_requantize = gr.Checkbox(
                            label="Allow re-quantizing a quantized model (loses quality)",
                            scale=2,
                            elem_id="allow-requantize",
                        )
                        quantize_button = gr.Button("Quantize", scale=1, elem_id="quantize")
                    with gr.Row(equal_height=True):
                        ladder_types = gr.CheckboxGroup(
                            choices=["Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0"],
                            value=["Q8_0", "Q4_K_M", "Q4_0"],
                            label="Ladder types",
                            scale=3,
                            elem_id="ladder-types",
                        )
                        ladder_button = gr.Button("Measure the ladder", scale=1, elem_id="ladder")
                        cancel_job = gr.Button("Cancel", variant="stop", scale=1, elem_id="cancel-job")
                    ladder_view = gr.Dataframe(
                        headers=LADDER_HEADERS, interactive=False, elem_id="ladder-table", label="Ladder"
                    )
                    ladder_chart = gr.Image(label="Quality vs speed vs size", elem_id="ladder-chart", type="filepath")
            with gr.Tab("Hardware", id="hardware-tab", elem_id="hardware-tab") as hardware_tab:
                machine = gr.Markdown("", elem_id="machine")
                plan_view = gr.HTML("", elem_id="plan")
                with gr.Row(equal_height=True):
                    backend_choice = gr.Dropdown(
                        choices=BACKEND_CHOICES, value="auto", label="Backend", elem_id="backend-choice", scale=2
                    )
                    device_choice = gr.Dropdown(
                        choices=[("Automatic", "auto")], value="auto", label="Device", elem_id="device-choice", scale=2
                    )
                    switch_button = gr.Button("Use these (reloads the model)", elem_id="switch", scale=1)
                switch_progress = gr.Markdown("", elem_id="switch-progress")
                api_section(services)
        timer = gr.Timer(1.0, active=True)

        collection_view = [collection, table, file_picker, summary]
        # Everything that reads or changes collections runs in one queue ("documents"), in the order it was asked
        # for: the page's first listing can never land after a collection the user just created.
        demo.load(page.on_load, outputs=[conversations, status, cancel_load, timer]).then(
            documents.first_view, outputs=[*collection_view, chat_collection], concurrency_id="documents"
        )
        timer.tick(page.on_tick, outputs=[status, cancel_load, timer], show_progress="hidden")
        # Not queued: a stuck load holds the "switch" queue, and this is the way out of it.
        cancel_load.click(page.cancel_load, outputs=[notice], queue=False)
        stream_outputs = [chatbot, message, conversation_id, conversations, notice]
        send_inputs = [message, conversation_id, system_prompt, temperature, max_new_tokens, chat_collection]
        # Answers run in parallel (the engine writes several at once and queues the rest); the runtime's leases,
        # not the page's queue, keep a model switch from closing the model under an answer.
        answer_queue: dict[str, Any] = {"concurrency_id": "generate", "concurrency_limit": PARALLEL_ANSWERS}
        message.submit(page.send, send_inputs, stream_outputs, **answer_queue)
        send_button.click(page.send, send_inputs, stream_outputs, **answer_queue)
        regenerate_button.click(
            page.regenerate,
            [conversation_id, system_prompt, temperature, max_new_tokens, chat_collection],
            stream_outputs,
            **answer_queue,
        )
        stop_button.click(page.stop, queue=False)
        conversations.input(
            page.open_conversation,
            [conversations],
            [chatbot, conversation_id, system_prompt, notice, chat_collection],
        )
        new_chat_outputs = [chatbot, conversation_id, conversations, system_prompt, notice]
        for button in (new_button, clear_button):
            button.click(page.new_chat, outputs=new_chat_outputs)
        # The chat box's own trash icon empties the view; make it start a new chat too (the old one stays saved),
        # so the next message never lands in a conversation the user can no longer see.
        chatbot.clear(page.new_chat, outputs=new_chat_outputs)
        # Deleting cannot be undone, so it takes a second, explicit click.
        delete_button.click(lambda: gr.update(visible=True), outputs=[confirm_row], queue=False)
        cancel_delete.click(lambda: gr.update(visible=False), outputs=[confirm_row], queue=False)
        confirm_delete.click(
            page.delete_conversation, [conversation_id], [chatbot, conversation_id, conversations, notice]
        ).then(lambda: gr.update(visible=False), outputs=[confirm_row], queue=False)

        # Models. Loading another model waits for the answers being written (the runtime sees to it); quantizing
        # and measuring get their own queue.
        models_tab.select(models_panel.view, outputs=[models_table, model_pick])
        import_button.click(
            models_panel.import_model, [import_path, import_file], [models_table, model_pick, import_path, import_file]
        )
        use_button.click(
            models_panel.use,
            [model_pick],
            [job_progress, models_table, model_pick, status, timer],
            concurrency_id="switch",
        )
        cancel_use.click(models_panel.cancel_load, outputs=[job_progress], queue=False)
        remove_model_button.click(models_panel.remove, [model_pick], [models_table, model_pick])
        quantize_button.click(
            models_panel.quantize,
            [model_pick, qtype, allow_requantize],
            [job_progress, models_table, model_pick],
            concurrency_id="models",
        )
        ladder_button.click(
            models_panel.ladder,
            [model_pick, ladder_types],
            [job_progress, ladder_view, ladder_chart],
            concurrency_id="models",
        )
        cancel_job.click(models_panel.cancel, queue=False)

        # Hardware. A switch waits for the answers being written; one switch at a time.
        hardware_tab.select(hardware.view, outputs=[machine, plan_view, backend_choice, device_choice])
        switch_button.click(
            hardware.switch,
            [backend_choice, device_choice],
            [switch_progress, plan_view, status, timer],
            concurrency_id="switch",
        )

        # Documents. Their queue is not the chat's, so chat keeps answering while files are indexed.
        collection.input(documents.view, [collection], collection_view, concurrency_id="documents")
        create_outputs = [*collection_view, chat_collection, new_name]
        for trigger in (create_button.click, new_name.submit):
            trigger(documents.create, [new_name, chat_collection], create_outputs, concurrency_id="documents")
        ingest_outputs = [progress, table, file_picker, summary, cancel_button, upload]
        upload.upload(documents.add_files, [collection, upload], ingest_outputs, concurrency_id="documents")
        folder_upload.upload(
            documents.add_files, [collection, folder_upload], ingest_outputs, concurrency_id="documents"
        )
        cancel_button.click(documents.cancel, queue=False)
        remove_button.click(
            documents.remove_file, [collection, file_picker], collection_view, concurrency_id="documents"
        )
        delete_collection_button.click(lambda: gr.update(visible=True), outputs=[confirm_collection_row], queue=False)
        keep_collection.click(lambda: gr.update(visible=False), outputs=[confirm_collection_row], queue=False)
        confirm_collection.click(
            documents.delete,
            [collection, chat_collection],
            [*collection_view, chat_collection],
            concurrency_id="documents",
        ).then(lambda: gr.update(visible=False), outputs=[confirm_collection_row], queue=False)
    return demo  # type: ignore[no-any-return]


def load_model_in_background(services: Services) -> threading.Thread:
    def run() -> None:
        try:
            for progress in services.control.start():
                log.info("load %.0f%%: %s", progress.fraction * 100, progress.message)
        except HearthError as exc:
            services.runtime.record_error(exc)  # the status line and every chat attempt show it
        try:
            # Warm up documents, so the first question about a collection waits neither for the embedding model
            # nor for its keyword index (about 15 s at 100,000 passages). With no collection yet there is nothing
            # to ask about, and loading the embedding model would only slow the first chat answer.
            documents = services.documents.get()
            collections = documents.manifest.collections()
            if collections:
                _ = documents.embedder.dimension
            for info in collections:
                documents.ingestor.reconcile(info)  # leftovers of a killed run must not be found (one count if none)
                documents.retriever.keyword_index(info)
        except HearthError as exc:
            log.warning("documents are not available: %s %s", exc.message, exc.remedy)

    thread = threading.Thread(target=run, name="hearth-model-load", daemon=True)
    thread.start()
    return thread


def launch(services: Services, open_browser: bool = False) -> RunningServer:
    """Start the page and the API on one port without blocking; the caller prints the URLs and waits on
    ``server.block_thread()``."""
    load_model_in_background(services)
    demo = build_ui(services)
    demo.queue(default_concurrency_limit=1)
    # run_history off: the page would keep every question in the browser, and offers to copy it to a cloud bucket.
    server = start_server(services, demo, {"css": CSS, "footer_links": [], "run_history": False})
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    return server
