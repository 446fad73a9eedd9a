"""What a Cancel button shows. A press answers on the button alone ("Cancelling…", not pressable again); the line
that tells how the work is going is left to the work's own stream or timer. A press is answered apart from that
stream, and a reply that arrived after the work's last word would otherwise cover it (CI saw a documents upload
end as "Cancelled after …" and the page keep "Cancelling…")."""

from __future__ import annotations

from typing import Any

import gradio as gr

PRESSED = "Cancelling…"


def pressed() -> Any:
    """The button once pressed while the work runs."""
    return gr.update(value=PRESSED, interactive=False)


def ready(label: str) -> Any:
    """The button as a new piece of work starts: shown, with its own words, pressable."""
    return gr.update(visible=True, value=label, interactive=True)


def hidden() -> Any:
    """The button while nothing it could stop is running."""
    return gr.update(visible=False)
