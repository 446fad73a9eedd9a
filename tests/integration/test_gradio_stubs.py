"""Gradio imported through Hearth does not run its stub writer (app/gradio_stubs.py), and its components still work."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

PROBE = """
import app
from app.gradio_stubs import _no_stub
import gradio as gr
import gradio.component_meta as meta
assert meta.create_or_modify_pyi is _no_stub, meta.create_or_modify_pyi
with gr.Blocks() as page:
    box = gr.Textbox(label="question")
    button = gr.Button("Send")
    button.click(lambda text: text, box, box)
assert page.get_config_file()["components"], "no components in the page's config"
print("ok")
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=False)


def test_gradio_comes_without_its_stub_writer_and_still_builds_a_page() -> None:
    ran = run(PROBE)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr[-3000:]
