"""Hearth: an offline assistant for your own computer."""

from app.gradio_stubs import install as _gradio_without_stub_writer

__version__ = "0.1.0"

# Before anything here imports Gradio (the page, the API's server, the tests): see app/gradio_stubs.py.
_gradio_without_stub_writer()
