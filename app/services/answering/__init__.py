"""Answering: the chat turn every front end shares — the question with its history fitted, the passages or files it
is answered from, the prompt, the stream, the checks after it — and `hearth ask`, the side-by-side comparison, the
tool turn."""
