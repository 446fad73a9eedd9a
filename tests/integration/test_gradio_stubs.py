"""Gradio imported through Hearth does not run its stub writer nor import the MCP SDK (app/gradio_stubs.py), its
components still work, and the SDK still imports afterwards for Hearth's own tools."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

PROBE = """
import app
from app.gradio_stubs import _no_stub
import sys
import gradio as gr
import gradio.component_meta as meta
assert meta.create_or_modify_pyi is _no_stub, meta.create_or_modify_pyi
assert "mcp" not in sys.modules, "Gradio imported the MCP SDK"
assert not hasattr(gr.mcp.GradioMCPServer, "Server")
with gr.Blocks() as page:
    box = gr.Textbox(label="question")
    button = gr.Button("Send")
    button.click(lambda text: text, box, box)
assert page.get_config_file()["components"], "no components in the page's config"
from mcp import Client, types
assert types.Tool(name="t", inputSchema={"type": "object"}).name == "t" and Client
print("ok")
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=False)


def test_gradio_comes_without_its_stub_writer_or_the_mcp_sdk_and_still_builds_a_page() -> None:
    ran = run(PROBE)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr[-3000:]
