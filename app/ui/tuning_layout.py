"""The Tuning tab's layout: what it holds, each control with its words (``build_tuning_tab``); its handlers and
wiring are in ``app/ui/tuning_tab.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.ui import tuning_view as view
from models.adapters import MODEL_SCOPE
from models.tuning.options import ALL_TARGETS, PRESETS, TuneOptions

FROM_FILE = "A JSON Lines file"
FROM_CONVERSATIONS = "Saved conversations"
FROM_COLLECTION = "A collection's passages"
SOURCES = [FROM_FILE, FROM_CONVERSATIONS, FROM_COLLECTION]
NO_RUN = "No training run yet."
INTRO = (
    "Teach the model you chat with from your own examples. Hearth trains a small **LoRA adapter** for the model "
    "in use, on this computer, in a process of its own (chat keeps answering, a little slower), and checks it "
    "through llama.cpp before offering it. Attach an adapter below to answer with it; the model is not reloaded."
)
FILE_HELP = (
    'One JSON object per line: `{"messages": [{"role": "user", ...}, {"role": "assistant", ...}]}`, '
    '`{"prompt": ..., "completion": ...}` or `{"text": ...}`.'
)
TUNING_CSS = """
#adapters-table table { font-size: 0.8rem; }
#adapters-table th, #adapters-table th * { word-break: keep-all; overflow-wrap: normal; }
"""


@dataclass
class TuningTab:
    tab: Any
    base_line: Any
    source: Any
    data_file: Any
    conversations: Any
    collection: Any
    name: Any
    preset: Any
    fields: list[Any]  # rank, alpha, targets, learning rate, epochs, steps, max length, batch, checkpointing
    check: Any
    measure: Any
    start: Any
    check_view: Any
    measure_view: Any
    run_pick: Any
    cancel: Any
    resume: Any
    progress: Any
    chart: Any
    timer: Any
    adapters: AdapterControls
    compare: CompareView


@dataclass
class AdapterControls:
    """The trained adapters, and attaching one for every answer, one collection's or one conversation's."""

    table: Any
    pick: Any
    scale: Any
    target: Any  # where an attached adapter answers: every answer, a collection, a conversation
    attach: Any
    detach: Any
    remove: Any
    confirm_row: Any
    confirm_remove: Any
    keep: Any
    message: Any

    @property
    def outputs(self) -> list[Any]:
        return [self.table, self.pick, self.target, self.message]


@dataclass
class CompareView:
    """The same question answered without and with the adapter picked above, side by side."""

    question: Any
    ask: Any
    without: Any
    with_adapter: Any
    note: Any


COMPARE_HELP = (
    "Ask one question both ways: the model as it is, then with the adapter picked above at its scale (same "
    "sampling and seed, so the adapter is the only difference)."
)


def build_compare() -> CompareView:
    gr.Markdown("### Compare", elem_id="compare-title")
    gr.Markdown(COMPARE_HELP)
    with gr.Row(equal_height=True):
        question = gr.Textbox(
            label="Question", placeholder="a question your examples teach", scale=4, elem_id="compare-question"
        )
        ask = gr.Button("Compare", scale=1, elem_id="compare-ask")
    with gr.Row():
        without = gr.Textbox(label="Without the adapter", lines=6, interactive=False, elem_id="compare-without")
        with_adapter = gr.Textbox(label="With the adapter", lines=6, interactive=False, elem_id="compare-with")
    note = gr.Markdown("", elem_id="compare-note")
    return CompareView(question, ask, without, with_adapter, note)


def build_tuning_tab() -> TuningTab:
    quick = PRESETS["quick"]
    with gr.Tab("Tuning", id="tuning-tab", elem_id="tuning-tab") as tab:
        gr.Markdown(INTRO)
        base_line = gr.Markdown("", elem_id="tune-base")
        source = gr.Radio(SOURCES, value=FROM_FILE, label="Learn from", elem_id="tune-source")
        data_file = gr.File(
            label="Training examples (.jsonl)",
            file_types=[".jsonl", ".json", ".txt"],
            type="filepath",
            height=110,
            elem_id="tune-file",
        )
        gr.Markdown(FILE_HELP, elem_id="tune-file-help")
        conversations = gr.CheckboxGroup(
            choices=[], label="Conversations to learn from", visible=False, elem_id="tune-conversations"
        )
        collection = gr.Dropdown(choices=[], label="Collection", visible=False, elem_id="tune-collection")
        with gr.Row(equal_height=True):
            name = gr.Textbox(label="Adapter name", placeholder="for example: house-style", elem_id="tune-name")
            preset = gr.Radio(
                [("Quick (a first look)", "quick"), ("Standard", "standard")],
                value="quick",
                label="Preset",
                info="Quick teaches a style (a sign-off, a format, a greeting) from a dozen examples; Standard is "
                "a larger adapter that learns more slowly, for many examples",
                elem_id="tune-preset",
            )
        fields = _advanced_settings(quick)
        with gr.Row():
            check = gr.Button("Check the data and estimate", elem_id="tune-check")
            measure = gr.Button("Time a few real steps", elem_id="tune-measure")
            start = gr.Button("Start training", variant="primary", elem_id="tune-start")
        check_view = gr.Markdown("", elem_id="tune-check-result")
        measure_view = gr.Markdown("", elem_id="tune-measure-result")
        run_pick, cancel, resume, progress, chart, timer = _runs_section()
        controls = _adapters_section()
        compare = build_compare()
    return TuningTab(
        tab, base_line, source, data_file, conversations, collection, name, preset, fields, check, measure, start,
        check_view, measure_view, run_pick, cancel, resume, progress, chart, timer, controls, compare,
    )  # fmt: skip


def _advanced_settings(quick: TuneOptions) -> list[Any]:
    """The settings a preset sets, each with what it does; the fields in the order the panel reads them."""
    with gr.Accordion("Advanced settings", open=False, elem_id="tune-advanced"):
        with gr.Row():
            rank = gr.Number(
                quick.rank,
                label="Rank",
                info="how much the adapter can learn: more learns finer detail, slower; 8 to 64 is usual",
                precision=0,
                minimum=1,
                elem_id="tune-rank",
            )
            alpha = gr.Number(
                quick.alpha,
                label="Alpha",
                info="how strongly what it learns counts; usually twice the rank",
                precision=0,
                minimum=1,
                elem_id="tune-alpha",
            )
            learning_rate = gr.Number(
                quick.learning_rate,
                label="Learning rate",
                info="the size of each step: too high and it forgets, too low and it learns nothing",
                elem_id="tune-lr",
            )
        targets = gr.CheckboxGroup(
            [(view.TARGET_WORDS[name], name) for name in ALL_TARGETS],
            value=list(quick.targets),
            label="Layers to adapt",
            info="attention decides what to look at; feed-forward holds what the model knows",
            elem_id="tune-targets",
        )
        with gr.Row():
            epochs = gr.Number(quick.epochs, label="Epochs", info="passes over your examples", elem_id="tune-epochs")
            steps = gr.Number(0, label="Steps (0: as many as the epochs take)", precision=0, elem_id="tune-steps")
            max_length = gr.Number(
                quick.max_length,
                label="Max length (tokens)",
                info="longer examples are cut",
                precision=0,
                elem_id="tune-len",
            )
            batch = gr.Number(
                quick.batch_size,
                label="Batch size",
                info="examples learned from at once",
                precision=0,
                minimum=1,
                elem_id="tune-batch",
            )
        checkpointing = gr.Checkbox(
            quick.gradient_checkpointing,
            label="Gradient checkpointing (less memory, about a third more time)",
            elem_id="tune-checkpointing",
        )
    return [rank, alpha, targets, learning_rate, epochs, steps, max_length, batch, checkpointing]


def _runs_section() -> tuple[Any, Any, Any, Any, Any, Any]:
    """A run picked from this data folder's runs: its progress, its loss chart, and Cancel or Resume."""
    gr.Markdown("### Runs")
    with gr.Row(equal_height=True):
        run_pick = gr.Dropdown(choices=[], label="Run", scale=4, elem_id="tune-run")
        cancel = gr.Button("Cancel", variant="stop", size="sm", scale=1, visible=False, elem_id="tune-cancel")
        resume = gr.Button("Resume", size="sm", scale=1, visible=False, elem_id="tune-resume")
    progress = gr.Markdown(NO_RUN, elem_id="tune-progress")
    # Drawn by Hearth (app/ui/loss_chart.py): a plot component's own ticks cut a short run into half steps.
    chart = gr.HTML("", elem_id="tune-chart")
    timer = gr.Timer(1.0, active=False)
    return run_pick, cancel, resume, progress, chart, timer


def _adapters_section() -> AdapterControls:
    """The adapters trained here, and attaching one to every answer, a collection's or a conversation's."""
    gr.Markdown("### Adapters")
    # Widths of their own: sized by their text, the columns ran past the page and the table scrolled sideways.
    adapters = gr.Dataframe(
        headers=view.ADAPTER_HEADERS,
        interactive=False,
        wrap=True,
        column_widths=list(view.ADAPTER_WIDTHS),
        elem_id="adapters-table",
        label="Adapters",
    )
    gr.Markdown(view.FIGURES_HELP, elem_id="adapters-help")
    with gr.Row(equal_height=True):
        adapter_pick = gr.Dropdown(choices=[], label="Adapter", scale=3, elem_id="adapter-pick")
        scale = gr.Slider(0.0, 1.0, value=1.0, step=0.05, label="Scale", scale=2, elem_id="adapter-scale")
        target = gr.Dropdown(
            choices=[view.EVERY_ANSWER],
            value=MODEL_SCOPE,
            label="For",
            info="every answer, or only a collection's or a conversation's",
            scale=3,
            elem_id="adapter-target",
        )
    with gr.Row():
        attach = gr.Button("Attach", variant="primary", elem_id="adapter-attach")
        detach = gr.Button("Detach", elem_id="adapter-detach")
        remove = gr.Button("Remove this adapter", variant="secondary", elem_id="adapter-remove")
    with gr.Row(visible=False) as confirm_row:
        gr.Markdown("Remove the adapter for good?")
        confirm_remove = gr.Button("Yes, remove it", size="sm", variant="stop", elem_id="adapter-confirm-remove")
        keep = gr.Button("Keep it", size="sm", elem_id="adapter-keep")
    adapter_message = gr.Markdown("", elem_id="adapter-message")
    return AdapterControls(
        adapters, adapter_pick, scale, target, attach, detach, remove, confirm_row, confirm_remove, keep,
        adapter_message,
    )  # fmt: skip
