"""Who is asking the page: a browser on this computer, or one elsewhere (a page served beyond loopback, with the
key). Changes that act as the user on this computer (a command to run, a file to read and send) are made only from
a page opened here."""

from __future__ import annotations

import gradio as gr

from app.api.policy import is_loopback


def from_this_computer(request: gr.Request | None) -> bool:
    host = getattr(getattr(request, "client", None), "host", None)
    return bool(host) and is_loopback(str(host))
