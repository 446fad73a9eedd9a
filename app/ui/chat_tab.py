"""The Chat tab and the conversations beside it: what they hold (``build_sidebar``, ``build_chat_tab``) and what
each control does (``wire_chat``, onto :class:`app.ui.chat_page.ChatPage`'s handlers). Wiring only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.settings import GenerationSettings
from app.ui.chat_controls import TOOLS_CHOICES, TOOLS_OFF
from app.ui.chat_page import ChatPage
from app.ui.documents import NO_COLLECTION
from app.ui.first_run_panel import build_first_run
from app.ui.render import answering_from

# Answers the page streams at once, across all tabs; beyond the engine's slots they wait there, in order.
PARALLEL_ANSWERS = 16
# Characters a message may hold before the page itself stops taking more (the model's context refuses far fewer).
MAX_MESSAGE_CHARS = 1_000_000
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


@dataclass
class SidebarUi:
    new: Any
    conversations: Any
    delete: Any
    confirm_row: Any
    confirm_delete: Any
    cancel_delete: Any


@dataclass
class ChatUi:
    tab: Any
    collection: Any
    answering: Any
    tools: Any
    first_run: Any
    chatbot: Any
    call_row: Any
    call_text: Any
    allow_once: Any
    allow_always: Any
    deny_call: Any
    files: Any
    pending_files: Any
    message: Any
    send: Any
    stop: Any
    notice: Any
    regenerate: Any
    system_prompt: Any
    temperature: Any
    max_new_tokens: Any


def build_sidebar() -> SidebarUi:
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
    return SidebarUi(new_button, conversations, delete_button, confirm_row, confirm_delete, cancel_delete)


def build_chat_tab(settings: GenerationSettings) -> ChatUi:
    with gr.Tab("Chat", id="chat-tab", elem_id="chat-tab") as chat_tab:
        collection, answering, tools = _source_row()
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
        message, send_button, stop_button = _composer()
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
    return ChatUi(
        chat_tab,
        collection,
        answering,
        tools,
        first_run_ui,
        chatbot,
        call_row,
        call_text,
        allow_once,
        allow_always,
        deny_call,
        chat_files,
        pending_files,
        message,
        send_button,
        stop_button,
        notice,
        regenerate_button,
        system_prompt,
        temperature,
        max_new_tokens,
    )


def _source_row() -> tuple[Any, Any, Any]:
    """Above the chat: the collection it answers from, and whether the model may call tools."""
    with gr.Row(elem_id="chat-source"):
        collection = gr.Dropdown(
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
        answering = gr.Markdown(answering_from(NO_COLLECTION), elem_id="answering-from", container=False, min_height=0)
        # Off until the user turns tools on; every call is then shown and asked about below the chat.
        tools = gr.Dropdown(
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
    return collection, answering, tools


def _composer() -> tuple[Any, Any, Any]:
    """The message box with Send and Stop beside it."""
    with gr.Row(equal_height=True, elem_id="composer"):
        # Files dropped on the box (or picked with its clip) belong to this conversation only.
        message = gr.MultimodalTextbox(
            placeholder="Type a message (Enter sends, Shift+Enter for a new line); drop a file here to ask about it",
            show_label=False,
            lines=1,
            max_lines=8,
            scale=1,
            min_width=160,
            container=False,
            elem_id="message",
            autofocus=True,
            sources=["upload"],
            # Every file reaches Hearth, which reads it or says why not: the browser's own type filter drops a file
            # it does not list (LICENSE, with no extension) without a word.
            file_count="multiple",
            submit_btn=False,
            # A long paste stays text in the box (Gradio would turn one over 1,000 characters into a file).
            max_plain_text_length=MAX_MESSAGE_CHARS,
        )
        send_button = gr.Button("Send", variant="primary", size="md", scale=0, min_width=64, elem_id="send")
        stop_button = gr.Button(
            "Stop", variant="stop", size="md", scale=0, min_width=64, elem_id="stop", interactive=False
        )
    return message, send_button, stop_button


def control_outputs(chat: ChatUi, sidebar: SidebarUi) -> list[Any]:
    """What ``ChatPage.controls`` sets after every change: which of Send, Stop, Regenerate and Delete may be used."""
    return [chat.send, chat.stop, chat.regenerate, sidebar.delete, sidebar.confirm_row]


def wire_chat(page: ChatPage, chat: ChatUi, sidebar: SidebarUi, conversation_id: Any, remembered: Any) -> None:
    """Send is disabled and Stop enabled while this tab's answer is written; Enter then says why nothing is sent
    (hence "multiple": the browser would otherwise drop the key press without a word). The controls are set again
    after every answer, whichever way it ended."""
    controls = control_outputs(chat, sidebar)
    stream_outputs = [
        chat.chatbot,
        chat.call_row,
        chat.call_text,
        chat.message,
        conversation_id,
        sidebar.conversations,
        chat.notice,
        *controls,
    ]
    settings = [chat.system_prompt, chat.temperature, chat.max_new_tokens, chat.collection, chat.tools]
    send_inputs = [chat.message, conversation_id, *settings]
    # Answers run in parallel (the engine writes several at once and queues the rest); the runtime's leases,
    # not the page's queue, keep a model switch from closing the model under an answer.
    answer_queue: dict[str, Any] = {"concurrency_id": "generate", "concurrency_limit": PARALLEL_ANSWERS}
    chat.message.submit(page.send, send_inputs, stream_outputs, trigger_mode="multiple", **answer_queue).then(
        page.controls, [conversation_id], controls, queue=False
    ).then(page.files_line, [conversation_id], [chat.files], queue=False)
    chat.send.click(page.send, send_inputs, stream_outputs, **answer_queue).then(
        page.controls, [conversation_id], controls, queue=False
    ).then(page.files_line, [conversation_id], [chat.files], queue=False)
    chat.regenerate.click(page.regenerate, [conversation_id, *settings], stream_outputs, **answer_queue).then(
        page.controls, [conversation_id], controls, queue=False
    ).then(page.files_line, [conversation_id], [chat.files], queue=False)
    conversation_id.change(page.files_line, [conversation_id], [chat.files], queue=False)
    chat.message.change(None, [chat.message], [chat.pending_files], js=PENDING_FILES_JS, queue=False)
    chat.stop.click(page.stop, queue=False)
    # Not queued: the answer waits on these, and holds its place in the queue while it does.
    chat.allow_once.click(page.allow_once, [chat.call_text], queue=False)
    chat.allow_always.click(page.allow_always, [chat.call_text], queue=False)
    chat.deny_call.click(page.deny, [chat.call_text], queue=False)
    _wire_conversations(page, chat, sidebar, conversation_id, remembered)


def _wire_conversations(
    page: ChatPage, chat: ChatUi, sidebar: SidebarUi, conversation_id: Any, remembered: Any
) -> None:
    controls = control_outputs(chat, sidebar)
    # Opening another conversation, or a new chat, stops this tab's answer first (it is kept as written).
    sidebar.conversations.input(
        page.open_conversation,
        [sidebar.conversations],
        [chat.chatbot, conversation_id, chat.system_prompt, chat.notice, chat.collection],
    ).then(page.controls, [conversation_id], controls, queue=False)
    new_outputs = [chat.chatbot, conversation_id, sidebar.conversations, chat.system_prompt, chat.notice]
    sidebar.new.click(page.new_chat, outputs=[*new_outputs, chat.collection]).then(
        page.controls, [conversation_id], controls, queue=False
    )
    # A conversation remembers its collection: a pick is stored with the open conversation at once.
    chat.collection.input(page.choose_collection, [conversation_id, chat.collection], queue=False)
    for changed in (chat.collection.change, conversation_id.change):
        changed(page.collection_changed, [conversation_id, chat.collection], [chat.answering, remembered], queue=False)
    # Deleting cannot be undone, so it takes a second, explicit click; with no conversation open it is disabled.
    sidebar.delete.click(lambda: gr.update(visible=True), outputs=[sidebar.confirm_row], queue=False)
    sidebar.cancel_delete.click(lambda: gr.update(visible=False), outputs=[sidebar.confirm_row], queue=False)
    sidebar.confirm_delete.click(
        page.delete_conversation,
        [conversation_id],
        [chat.chatbot, conversation_id, sidebar.conversations, chat.notice, chat.collection],
    ).then(page.controls, [conversation_id], controls, queue=False)
