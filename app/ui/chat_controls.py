"""Which chat controls a browser tab offers, decided from two facts: whether its answer is being written now,
and whether a saved conversation is open; and the choices of the Tools control above the chat. Pure;
``app.ui.chat_page`` turns the decision into Gradio updates."""

from __future__ import annotations

from dataclasses import dataclass

# Shown when Enter (or a second click) asks for another answer while this tab's answer is still being written.
STILL_WRITING = "Still writing the answer above: wait for it, or press Stop. Your message stays in the box."

# The Tools choice above the chat: no tools, the model decides, or its first answer must be a call.
TOOLS_OFF = "off"
TOOLS_AUTO = "auto"
TOOLS_FIRST = "call"
TOOLS_CHOICES = [
    ("No tools", TOOLS_OFF),
    ("Tools: the model decides", TOOLS_AUTO),
    ("Tools: call one first", TOOLS_FIRST),
]
NO_TOOLS = (
    "No tool is on (the calculator is switched off, and no server is added in the Tools tab): this answer is "
    "written without tools."
)
NOTHING_WAITING = "No tool call is waiting: the answer was stopped, or the call was already answered."


@dataclass(frozen=True)
class ChatControls:
    """Whether each button can be pressed."""

    send: bool
    stop: bool
    regenerate: bool
    delete: bool


def chat_controls(answering: bool, conversation_open: bool) -> ChatControls:
    """While an answer is written only Stop acts on it; otherwise Send, and what needs an open conversation
    (answering its last question again, deleting it) only when one is open."""
    if answering:
        return ChatControls(send=False, stop=True, regenerate=False, delete=False)
    return ChatControls(send=True, stop=False, regenerate=conversation_open, delete=conversation_open)
