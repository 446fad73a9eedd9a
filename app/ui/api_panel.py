"""The Hardware tab's API section: the address OpenAI clients use, the key (sent to the page only when asked
for, and replaced here after a confirmation), and a copyable example for the ``openai`` Python package."""

from __future__ import annotations

from typing import Any

import gradio as gr

from app.api.keys import ApiKeyStore
from app.api.server import shown_host
from app.services.container import Services
from app.settings import ServerSettings
from app.ui.errors import as_gradio_error
from models.shared.errors import HearthError

KEY_PLACEHOLDER = "PASTE-THE-KEY"  # shown until the user asks for the real key


def base_url(host_header: str | None, settings: ServerSettings) -> str:
    """The API's address as this browser reached the page (it passed the Host check, so it works from here)."""
    host = host_header or f"{shown_host(settings.host)}:{settings.port}"
    return f"http://{host}/v1"


def address_markdown(url: str) -> str:
    return (
        f"OpenAI-compatible API: **`{url}`** — same port as this page. Every request needs the key as "
        "`Authorization: Bearer KEY` (or `api_key=` in the client). Model ids: `hearth` (the loaded model), "
        "`hearth:COLLECTION` (answer from a collection, sources in the reply's `hearth` field); "
        "`GET /v1/models` lists them. **Replace key** makes a new key: programs using the old one are refused "
        "from then on."
    )


def example_code(url: str, key: str) -> str:
    return f'''from openai import OpenAI

client = OpenAI(base_url="{url}", api_key="{key}")
stream = client.chat.completions.create(
    model="hearth",  # or "hearth:COLLECTION" to answer from your documents
    messages=[{{"role": "user", "content": "Say hello in five words."}}],
    stream=True,
)
for chunk in stream:
    if chunk.choices:
        print(chunk.choices[0].delta.content or "", end="", flush=True)
print()
'''


class ApiPanel:
    def __init__(self, services: Services) -> None:
        self._keys = ApiKeyStore(services.paths.api_key_file)
        self._settings = services.settings.server

    def view(self, request: gr.Request) -> tuple[Any, ...]:
        url = base_url(_host(request), self._settings)
        return address_markdown(url), example_code(url, KEY_PLACEHOLDER)

    def reveal(self, request: gr.Request) -> tuple[Any, ...]:
        try:
            key = self._keys.get()
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        url = base_url(_host(request), self._settings)
        return gr.update(value=key, type="text"), example_code(url, key)

    def replace(self, request: gr.Request) -> tuple[Any, ...]:
        """A new key, shown at once (the old one stops working now), and the confirmation hidden again."""
        try:
            key = self._keys.rotate()
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        gr.Info("The API key was replaced. Programs using the old key must use this one now.")
        url = base_url(_host(request), self._settings)
        return gr.update(value=key, type="text"), example_code(url, key), gr.update(visible=False)


def _host(request: gr.Request | None) -> str | None:
    headers = getattr(request, "headers", None)
    return headers.get("host") if headers is not None else None


def api_section(services: Services) -> None:
    """Build the section where it is called (inside the Hardware tab) and wire its events."""
    panel = ApiPanel(services)
    with gr.Accordion("API", open=False, elem_id="api-accordion") as accordion:
        address = gr.Markdown("", elem_id="api-address")
        with gr.Row(equal_height=True):
            key = gr.Textbox(
                label="API key", type="password", interactive=False, buttons=["copy"], elem_id="api-key", scale=4
            )
            reveal = gr.Button("Show key", elem_id="api-reveal", scale=1)
            replace = gr.Button("Replace key", elem_id="api-replace", scale=1, variant="secondary")
        # Replacing cannot be undone (programs holding the old key stop working), so it takes a second click.
        with gr.Row(visible=False, elem_id="api-replace-confirm") as confirm_row:
            gr.Markdown("Programs using the current key will be refused until they use the new one. Replace it?")
            confirm = gr.Button("Yes, replace it", variant="stop", size="sm", elem_id="api-replace-yes")
            keep = gr.Button("Keep it", size="sm", elem_id="api-replace-no")
        example = gr.Code(
            language="python",
            label="Example: Python, with the openai package",
            interactive=False,
            elem_id="api-example",
        )
    accordion.expand(panel.view, outputs=[address, example], queue=False)
    reveal.click(panel.reveal, outputs=[key, example], queue=False)
    replace.click(lambda: gr.update(visible=True), outputs=[confirm_row], queue=False)
    keep.click(lambda: gr.update(visible=False), outputs=[confirm_row], queue=False)
    confirm.click(panel.replace, outputs=[key, example, confirm_row], queue=False)
