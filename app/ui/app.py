"""The Gradio page. Wiring only: the logic lives in the services and in ``render``."""

from __future__ import annotations

import logging
import threading
from typing import Any

import gradio as gr

from app.api.server import RunningServer, start_server
from app.services.container import Services
from app.ui.chat_page import REMEMBERED_DEFAULT, ChatPage
from app.ui.chat_tab import build_chat_tab, build_sidebar, control_outputs, wire_chat
from app.ui.chroma_server_section import ServerSection
from app.ui.documents import DocumentsPanel, build_documents_tab, wire_documents_tab
from app.ui.first_run_panel import FirstRunPanel, wire_first_run
from app.ui.hardware import HardwarePanel, build_hardware_tab, wire_hardware_tab
from app.ui.models_layout import MODELS_CSS, build_models_tab
from app.ui.models_tab import ModelsPanel, wire_models_tab
from app.ui.page_files import use_private_page_files
from app.ui.page_key import page_key
from app.ui.page_uploads import PageUploads
from app.ui.theme import THEME_CSS, hearth_theme
from app.ui.tools_tab import ToolsPanel, build_tools_tab, wire_tools_tab
from app.ui.tuning_layout import TUNING_CSS, build_tuning_tab
from app.ui.tuning_tab import TuningPanel, wire_tuning_tab
from models.shared.errors import HearthError

log = logging.getLogger(__name__)

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
/* The chat takes the window's height less what is above and below it, so the message box stays in view at any
   window size (the desktop window's default too); the first-run note, when shown, takes its share. */
#chat { height: max(220px, calc(100vh - 360px)) !important; }
#tabs:has(#first-run) #chat { height: max(180px, calc(100vh - 540px)) !important; }
"""
# Rules about elements outside the page's own container, which Gradio scopes every rule of CSS into.
HEAD_STYLE = """<style>
/* Narrow windows: a thin page margin, so the chat and its message box get the width. */
@media (max-width: 768px) { .gradio-container .main.app { padding-left: 12px; padding-right: 12px; } }
/* Until PAGE_JS has closed the sidebar of a narrow window, it is kept out of sight (no flash over the page). */
@media (max-width: 1024px) { html:not([data-hearth-layout]) #sidebar { visibility: hidden; } }
</style>"""
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
    server_section = ServerSection(documents)  # the page's choice of Chroma server, on the Documents tab
    models_panel = ModelsPanel(services, uploads)
    page = ChatPage(services, documents)
    max_file_mb = services.settings.rag.max_file_mb  # the page's upload limit too (app.api.server)
    with demo:
        conversation_id = gr.State(None)
        # Kept in this browser between reloads: the open conversation, or a new chat's collection.
        remembered = gr.BrowserState(
            dict(REMEMBERED_DEFAULT), storage_key="hearth-chat", secret=page_key(services.paths.page_key)
        )
        sidebar = build_sidebar()
        status, cancel_load = _status_line()
        with gr.Tabs(elem_id="tabs"):
            chat = build_chat_tab(services.settings.generation)
            documents_ui = build_documents_tab(max_file_mb)
            tools_tab, tools_ui = build_tools_tab()
            models_ui = build_models_tab(max_file_mb, services.settings.model.recommended)
            tuning_ui = build_tuning_tab()
            hardware_ui = build_hardware_tab(services)
        timer = gr.Timer(1.0, active=True)

        # The page's first listing of collections runs in their queue ("documents"), so it can never land after a
        # collection the user just created.
        shown = [chat.chatbot, conversation_id, chat.system_prompt, chat.collection]
        loaded = demo.load(page.on_load, [remembered], [sidebar.conversations, status, cancel_load, timer, *shown])
        loaded.then(page.controls, [conversation_id], control_outputs(chat, sidebar), queue=False).then(
            page.documents_view, [chat.collection], [*documents_ui.view, chat.collection], concurrency_id="documents"
        ).then(server_section.view, outputs=documents_ui.server.shown, queue=False)
        status_outputs = [status, cancel_load, timer]
        timer.tick(page.on_tick, outputs=status_outputs, show_progress="hidden")
        # Not queued: a stuck load holds the "switch" queue, and this is the way out of it.
        cancel_load.click(page.cancel_load, outputs=[chat.notice], queue=False)
        wire_chat(page, chat, sidebar, conversation_id, remembered)

        # Models. Loading another model waits for the answers being written (the runtime sees to it); quantizing
        # and measuring get their own queue; installing runs in the background.
        wire_models_tab(models_panel, models_ui, status, timer)
        first_run = FirstRunPanel(services, models_panel.installs)
        # After "Use it for chat" the status line names the model now answering, without waiting for a reload.
        wire_first_run(first_run, chat.first_run, [loaded.then, chat.tab.select], page.on_tick, status_outputs)
        # Tuning. The trainer is a process of its own; the tab's timer draws its progress from the run's folder.
        wire_tuning_tab(TuningPanel(services, uploads), tuning_ui, page.on_tick, status_outputs)
        tools = ToolsPanel(
            services.paths.mcp_servers_file, services.paths.tool_consent_file, services.settings.tools.call_timeout_s
        )
        wire_tools_tab(tools, tools_ui, tools_tab)
        wire_hardware_tab(HardwarePanel(services), hardware_ui, services, status, timer)
        wire_documents_tab(documents, documents_ui, chat.collection, server_section)
    return demo


def _status_line() -> tuple[Any, Any]:
    """Above the tabs: the model's state, and a way out of a load that takes too long."""
    with gr.Row(equal_height=True):
        status = gr.Markdown("Starting…", elem_id="status-line")
        cancel_load = gr.Button(
            "Cancel loading", variant="stop", size="sm", scale=0, min_width=140, visible=False, elem_id="cancel-load"
        )
    return status, cancel_load


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
        except HearthError as exc:
            log.warning("documents are not available: %s %s", exc.message, exc.remedy)
            return
        for info in collections:
            try:
                documents.ingestor.reconcile(info)  # leftovers of a killed run must not be found (one count if none)
                documents.tidy_uploads(info)  # and copies of uploads it had not listed yet are removed
                documents.retriever.keyword_index(info)
            except HearthError as exc:  # one collection (on a server that is down, say) does not stop the others
                log.warning("collection %r is not available: %s %s", info.name, exc.message, exc.remedy)

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
