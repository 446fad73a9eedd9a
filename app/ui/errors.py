"""How a typed Hearth error is shown on the page: a dialog with what happened and what to do."""

from __future__ import annotations

import gradio as gr

from models.shared.errors import HearthError


def as_gradio_error(exc: HearthError) -> gr.Error:
    return gr.Error(exc.for_page, title="Hearth", print_exception=False)
