"""The Gradio page. Wiring only: the logic lives in the services and in ``render``."""

from __future__ import annotations

import logging
import threading
from typing import Any

import gradio as gr

from app.api.server import RunningServer, start_server
from app.errors import HearthError
from app.services.container import Services
from app.ui.api_panel import api_section
from app.ui.bench_section import BenchPanel, build_bench_section, wire_bench_section
from app.ui.chat_page import REMEMBERED_DEFAULT, TOOLS_CHOICES, TOOLS_OFF, ChatPage
from app.ui.document_text import TABLE_HEADERS
from app.ui.documents import NO_COLLECTION, DocumentsPanel
from app.ui.first_run_panel import FirstRunPanel, build_first_run, wire_first_run
from app.ui.hardware import HardwarePanel
from app.ui.hardware_view import BACKEND_CHOICES
from app.ui.models_tab import MODELS_CSS, ModelsPanel, build_models_tab, wire_models_tab
from app.ui.page_files import use_private_page_files
from app.ui.page_key import page_key
from app.ui.page_uploads import PageUploads
from app.ui.render import answering_from, upload_limit_note
from app.ui.theme import THEME_CSS, hearth_theme
from app.ui.tools_tab import ToolsPanel, build_tools_tab, wire_tools_tab
from app.ui.tuning_tab import TUNING_CSS, TuningPanel, build_tuning_tab, wire_tuning_tab
from app.ui.workers import WorkersPanel, build_workers_section, wire_workers_section
from rag.reading.loaders import SUPPORTED_SUFFIXES

log = logging.getLogger(__name__)

# Answers the page streams at once, across all tabs; beyond the engine's slots they wait there, in order.
PARALLEL_ANSWERS = 16
# Characters a message may hold before the page itself stops taking more (the model's context refuses far fewer).
MAX_MESSAGE_CHARS = 1_000_000

CSS = """
#status-line { font-size: 0.9em; }
#notice { color: var(--body-text-color-subdued); font-size: 0.85em; min-height: 1em; }
#answering-from { align-self: center; }
/* New chat is the one way to start over: the chat box's own trash icon (always drawn by Gradio) is not shown. */
#chat button[aria-label='Clear'] { display: none; }
footer { display: none !important; }
/* The message box takes the row; Send and Stop stay button-sized, side by side, at any width. */
#composer { flex-wrap: nowrap; gap: var(--size-2); }
#composer > button { flex: 0 0 auto; padding-left: var(--size-3); padding-right: var(--size-3); }
/* Gradio's closed sidebar leaves its toggle over the page's top left corner: keep the status line clear of it. */
@media (max-width: 768px) { #status-line { padding-left: var(--size-8); } }
"""
# Rules about elements outside the page's own container, which Gradio scopes every rule of CSS into.
HEAD_STYLE = """<style>
/* Narrow windows: a thin page margin, so the chat and its message box get the width. */
@media (max-width: 768px) { .gradio-container .main.app { padding-left: 12px; padding-right: 12px; } }
/* Until PAGE_JS has closed the sidebar of a narrow window, it is kept out of sight (no flash over the page). */
@media (max-width: 1024px) { html:not([data-hearth-layout]) #sidebar { visibility: hidden; } }
</style>"""
# Names the files in the message box, in the browser (no request per key press): their names are escaped for
# Markdown, which the line is drawn with.
PENDING_FILES_JS = r"""
(message) => {
    const files = (message && message.files) || [];
    if (!files.length) return '';
    const names = files.map((f) => (f.orig_name || String(f.path || '').split('/').pop() || 'file'));
    const escaped = names.map((n) => n.replace(/([\\`*_{}\[\]()#+\-.!|<>~&])/g, '\\$1'));
    return 'To attach with your next message: **' + escaped.join('**, **') + '**';
}
"""
# Gradio draws the sidebar over the whole page below 769 px and squeezes the chat beside it up to about 1000:
# there it starts closed (its toggle opens it). Wide windows keep it open.
PAGE_JS = """
() => {
    const narrow = window.matchMedia('(max-width: 1024px)').matches;
    const settle = () => document.documentElement.setAttribute('data-hearth-layout', narrow ? 'narrow' : 'wide');
    if (!narrow) { settle(); return; }
    let tries = 0;
    const close = () => {
        const sidebar = document.getElementById('sidebar');
        const toggle = sidebar && sidebar.querySelector('.toggle-button');
        if (toggle && sidebar.classList.contains('open')) {
            toggle.click();
            setTimeout(settle, 400);  // after its slide, so it is never seen moving
        } else if (++tries < 200) {
            setTimeout(close, 25);
        } else {
            settle();
        }
    };
    close();
}
"""


def build_ui(services: Services) -> gr.Blocks:
    use_private_page_files(services.paths.page_files_dir)  # before the Blocks: Gradio reads it at construction
    demo = gr.Blocks(title="Hearth", analytics_enabled=False, fill_height=True, delete_cache=(3600, 3600))
    # Handlers read only files the page's own upload route stored in this run (app.ui.page_uploads).
    uploads = PageUploads(lambda: demo.upload_file_set)
    documents = DocumentsPanel(services, uploads)
    hardware = HardwarePanel(services)
    models_panel = ModelsPanel(services, uploads)
    tuning_panel = TuningPanel(services, uploads)
    page = ChatPage(services, documents)
    settings = services.settings.generation
    max_file_mb = services.settings.rag.max_file_mb  # the page's upload limit too (app.api.server)
    with demo:
        conversation_id = gr.State(None)
        # Kept in this browser between reloads: the open conversation, or a new chat's collection.
        remembered = gr.BrowserState(
            dict(REMEMBERED_DEFAULT), storage_key="hearth-chat", secret=page_key(services.paths.page_key)
        )
        # Open on wide windows; PAGE_JS closes it on narrow ones, where Gradio draws it over the whole page.
        with gr.Sidebar(label="Conversations", open=True, elem_id="sidebar"):
            gr.Markdown("## Hearth\nYour private, offline assistant")
            new_button = gr.Button("New chat", variant="primary", elem_id="new-chat")
            conversations = gr.Radio(choices=[], label="Conversations", elem_id="conversation-list", interactive=True)
            delete_button = gr.Button("Delete this conversation", size="sm", elem_id="delete", interactive=False)
            with gr.Column(visible=False) as confirm_row:
                gr.Markdown("Delete this conversation for good?", elem_id="confirm-delete-text")
                with gr.Row():
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
            with gr.Tab("Chat", id="chat-tab", elem_id="chat-tab") as chat_tab:
                with gr.Row(elem_id="chat-source"):
                    chat_collection = gr.Dropdown(
                        choices=[("None (plain chat)", NO_COLLECTION)],
                        value=NO_COLLECTION,
                        label="Documents for this chat",
                        show_label=False,
                        container=False,
                        scale=1,
                        min_width=180,
                        elem_id="chat-collection",
                        # The page's first refresh can land after a collection was just created; the name is
                        # checked on the server anyway, so a value the list does not show yet is no error.
                        allow_custom_value=True,
                        interactive=True,
                    )
                    answering = gr.Markdown(
                        answering_from(NO_COLLECTION), elem_id="answering-from", container=False, min_height=0
                    )
                    # Off until the user turns tools on; every call is then shown and asked about below the chat.
                    chat_tools = gr.Dropdown(
                        choices=TOOLS_CHOICES,
                        value=TOOLS_OFF,
                        label="Tools",
                        show_label=False,
                        container=False,
                        scale=0,
                        min_width=230,
                        elem_id="chat-tools",
                        interactive=True,
                    )
                # While the small embedded model answers: what that means, and the recommended model to install.
                first_run_ui = build_first_run()
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
                # A tool call the model made waits here for the user's word; nothing runs before it.
                with gr.Row(visible=False, equal_height=False, elem_id="call-approval") as call_row:
                    call_text = gr.Markdown("", elem_id="call-question")
                    allow_once = gr.Button("Allow once", variant="primary", size="sm", scale=0, elem_id="allow-once")
                    allow_always = gr.Button("Always allow this tool", size="sm", scale=0, elem_id="allow-always")
                    deny_call = gr.Button("Deny", variant="stop", size="sm", scale=0, elem_id="deny-call")
                # The files attached to this conversation, and how the last answer used each.
                chat_files = gr.Markdown("", elem_id="chat-files", container=False, min_height=0)
                # The files in the message box, named before they are sent (the box shows only an icon for each).
                pending_files = gr.Markdown("", elem_id="pending-files", container=False, min_height=0)
                with gr.Row(equal_height=True, elem_id="composer"):
                    # Files dropped on the box (or picked with its clip) belong to this conversation only.
                    message = gr.MultimodalTextbox(
                        placeholder="Type a message (Enter sends, Shift+Enter for a new line); drop a file here to "
                        "ask about it",
                        show_label=False,
                        lines=1,
                        max_lines=8,
                        scale=1,
                        min_width=160,
                        container=False,
                        elem_id="message",
                        autofocus=True,
                        sources=["upload"],
                        file_types=list(SUPPORTED_SUFFIXES),
                        file_count="multiple",
                        submit_btn=False,
                        # A long paste stays text in the box (Gradio would turn one over 1,000 characters into a file).
                        max_plain_text_length=MAX_MESSAGE_CHARS,
                    )
                    send_button = gr.Button("Send", variant="primary", size="md", scale=0, min_width=64, elem_id="send")
                    stop_button = gr.Button(
                        "Stop", variant="stop", size="md", scale=0, min_width=64, elem_id="stop", interactive=False
                    )
                with gr.Row(equal_height=True):
                    notice = gr.Markdown("", elem_id="notice")
                    regenerate_button = gr.Button(
                        "Regenerate", size="sm", scale=0, min_width=110, elem_id="regenerate", interactive=False
                    )
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
                    "into passages and indexed on this computer; pick the collection above the chat to ask "
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
                # Not equal heights: the button keeps its size and place while the line beside it grows and shrinks,
                # so a press lands on it.
                with gr.Row(equal_height=False):
                    progress = gr.Markdown("", elem_id="ingest-progress")
                    cancel_button = gr.Button(
                        "Cancel", variant="stop", size="sm", visible=False, elem_id="cancel", scale=0, min_width=100
                    )
                table = gr.Dataframe(
                    headers=TABLE_HEADERS,
                    datatype=["str", "str", "number", "str"],
                    interactive=False,
                    wrap=True,
                    elem_id="files",
                    label="Files",
                )
                # Shown only with a collection to act on.
                with gr.Column(visible=False, elem_id="collection-actions") as collection_actions:
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
            tools_tab, tools_ui = build_tools_tab()
            models_ui = build_models_tab(max_file_mb)
            tuning_ui = build_tuning_tab()
            with gr.Tab("Hardware", id="hardware-tab", elem_id="hardware-tab") as hardware_tab:
                machine = gr.Markdown("", elem_id="machine")
                with gr.Row():
                    refresh_machine = gr.Button(
                        "Read free memory again", size="sm", scale=0, min_width=200, elem_id="refresh-machine"
                    )
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
                workers_ui = build_workers_section()
                bench_ui = build_bench_section()
                api_section(services)
        timer = gr.Timer(1.0, active=True)

        collection_view = [collection, table, file_picker, summary, collection_actions]
        # Everything that reads or changes collections runs in one queue ("documents"), in the order it was asked
        # for: the page's first listing can never land after a collection the user just created.
        control_outputs = [send_button, stop_button, regenerate_button, delete_button, confirm_row]
        shown = [chatbot, conversation_id, system_prompt, chat_collection]
        loaded = demo.load(page.on_load, [remembered], [conversations, status, cancel_load, timer, *shown])
        loaded.then(page.controls, [conversation_id], control_outputs, queue=False).then(
            page.documents_view, [chat_collection], [*collection_view, chat_collection], concurrency_id="documents"
        )
        timer.tick(page.on_tick, outputs=[status, cancel_load, timer], show_progress="hidden")
        # Not queued: a stuck load holds the "switch" queue, and this is the way out of it.
        cancel_load.click(page.cancel_load, outputs=[notice], queue=False)

        # Chat. Send is disabled and Stop enabled while this tab's answer is written; Enter then says why nothing
        # is sent (hence "multiple": the browser would otherwise drop the key press without a word). The controls
        # are set again after every answer, whichever way it ended.
        stream_outputs = [
            chatbot,
            call_row,
            call_text,
            message,
            conversation_id,
            conversations,
            notice,
            *control_outputs,
        ]
        send_inputs = [
            message,
            conversation_id,
            system_prompt,
            temperature,
            max_new_tokens,
            chat_collection,
            chat_tools,
        ]
        # Answers run in parallel (the engine writes several at once and queues the rest); the runtime's leases,
        # not the page's queue, keep a model switch from closing the model under an answer.
        answer_queue: dict[str, Any] = {"concurrency_id": "generate", "concurrency_limit": PARALLEL_ANSWERS}
        message.submit(page.send, send_inputs, stream_outputs, trigger_mode="multiple", **answer_queue).then(
            page.controls, [conversation_id], control_outputs, queue=False
        ).then(page.files_line, [conversation_id], [chat_files], queue=False)
        send_button.click(page.send, send_inputs, stream_outputs, **answer_queue).then(
            page.controls, [conversation_id], control_outputs, queue=False
        ).then(page.files_line, [conversation_id], [chat_files], queue=False)
        regenerate_button.click(
            page.regenerate,
            [conversation_id, system_prompt, temperature, max_new_tokens, chat_collection, chat_tools],
            stream_outputs,
            **answer_queue,
        ).then(page.controls, [conversation_id], control_outputs, queue=False).then(
            page.files_line, [conversation_id], [chat_files], queue=False
        )
        conversation_id.change(page.files_line, [conversation_id], [chat_files], queue=False)
        message.change(None, [message], [pending_files], js=PENDING_FILES_JS, queue=False)
        stop_button.click(page.stop, queue=False)
        # Not queued: the answer waits on these, and holds its place in the queue while it does.
        allow_once.click(page.allow_once, [call_text], queue=False)
        allow_always.click(page.allow_always, [call_text], queue=False)
        deny_call.click(page.deny, [call_text], queue=False)
        # Opening another conversation, or a new chat, stops this tab's answer first (it is kept as written).
        conversations.input(
            page.open_conversation,
            [conversations],
            [chatbot, conversation_id, system_prompt, notice, chat_collection],
        ).then(page.controls, [conversation_id], control_outputs, queue=False)
        new_button.click(
            page.new_chat, outputs=[chatbot, conversation_id, conversations, system_prompt, notice, chat_collection]
        ).then(page.controls, [conversation_id], control_outputs, queue=False)
        # A conversation remembers its collection: a pick is stored with the open conversation at once.
        chat_collection.input(page.choose_collection, [conversation_id, chat_collection], queue=False)
        for changed in (chat_collection.change, conversation_id.change):
            changed(page.collection_changed, [conversation_id, chat_collection], [answering, remembered], queue=False)
        # Deleting cannot be undone, so it takes a second, explicit click; with no conversation open it is disabled.
        delete_button.click(lambda: gr.update(visible=True), outputs=[confirm_row], queue=False)
        cancel_delete.click(lambda: gr.update(visible=False), outputs=[confirm_row], queue=False)
        confirm_delete.click(
            page.delete_conversation,
            [conversation_id],
            [chatbot, conversation_id, conversations, notice, chat_collection],
        ).then(page.controls, [conversation_id], control_outputs, queue=False)

        # Models. Loading another model waits for the answers being written (the runtime sees to it); quantizing
        # and measuring get their own queue; installing runs in the background.
        wire_models_tab(models_panel, models_ui, status, timer)
        wire_first_run(FirstRunPanel(services, models_panel.installs), first_run_ui, [loaded.then, chat_tab.select])

        # Tuning. The trainer is a process of its own; the tab's timer draws its progress from the run's folder.
        wire_tuning_tab(tuning_panel, tuning_ui)

        # Hardware. A switch waits for the answers being written; one switch at a time.
        hardware_tab.select(hardware.view, outputs=[machine, plan_view, backend_choice, device_choice])
        refresh_machine.click(hardware.machine, outputs=[machine], queue=False)
        tools = ToolsPanel(
            services.paths.mcp_servers_file, services.paths.tool_consent_file, services.settings.tools.call_timeout_s
        )
        wire_tools_tab(tools, tools_ui, tools_tab)
        bench = BenchPanel(services.paths.root / "benchmarks", lambda: services.control.choice.path)
        wire_bench_section(bench, bench_ui, hardware_tab)
        wire_workers_section(
            WorkersPanel(services.paths.workers_file), workers_ui, hardware_tab, hardware.backend_picker, backend_choice
        )
        switch_button.click(
            hardware.switch,
            [backend_choice, device_choice],
            [switch_progress, plan_view, status, timer, backend_choice, device_choice, machine],
            concurrency_id="switch",
        )

        # Documents. Their queue is not the chat's, so chat keeps answering while files are indexed.
        collection.input(documents.view, [collection], collection_view, concurrency_id="documents")
        create_outputs = [*collection_view, chat_collection, new_name]
        ingest_outputs = [progress, table, file_picker, summary, cancel_button, upload]
        for trigger in (create_button.click, new_name.submit):
            trigger(documents.create, [new_name, chat_collection], create_outputs, concurrency_id="documents").success(
                documents.add_kept, [collection, upload], ingest_outputs, concurrency_id="documents"
            )
        upload.upload(documents.add_files, [collection, upload], ingest_outputs, concurrency_id="documents")
        folder_upload.upload(
            documents.add_files, [collection, folder_upload], ingest_outputs, concurrency_id="documents"
        )
        cancel_button.click(documents.cancel, outputs=[cancel_button], queue=False, show_progress="hidden")
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
    return demo


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
                documents.tidy_uploads(info)  # and copies of uploads it had not listed yet are removed
                documents.retriever.keyword_index(info)
        except HearthError as exc:
            log.warning("documents are not available: %s %s", exc.message, exc.remedy)

    thread = threading.Thread(target=run, name="hearth-model-load", daemon=True)
    thread.start()
    return thread


def launch(services: Services) -> RunningServer:
    """Start the page and the API on one port without blocking; the caller prints the URLs and waits on
    ``server.block_thread()``."""
    load_model_in_background(services)
    demo = build_ui(services)
    demo.queue(default_concurrency_limit=1)
    # run_history off: the page would keep every question in the browser, and offers to copy it to a cloud bucket.
    page_options = {
        "css": THEME_CSS + CSS + MODELS_CSS + TUNING_CSS,
        "theme": hearth_theme(),
        "js": PAGE_JS,
        "head": HEAD_STYLE,
        "footer_links": [],
        "run_history": False,
    }
    return start_server(services, demo, page_options)
