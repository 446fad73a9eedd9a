"""Which chat controls a browser tab offers, decided from two facts: whether its answer is being written now,
and whether a saved conversation is open. Pure; ``app.ui.app`` turns the decision into Gradio updates."""

from __future__ import annotations

from dataclasses import dataclass

# Shown when Enter (or a second click) asks for another answer while this tab's answer is still being written.
STILL_WRITING = "Still writing the answer above: wait for it, or press Stop. Your message stays in the box."


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
