"""The Workers part of the Hardware tab: the paired workers as they answer now, pairing with a code, and removing one.
Wiring only; the table comes from ``app.ui.workers_view``. Asking a worker that is down takes up to its timeout, so
the list is filled after the rest of the tab shows."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.services.workers import WorkerBook
from app.ui.workers_view import pair_note, workers_html
from models.shared.errors import HearthError


@dataclass
class WorkersUi:
    table: Any
    address: Any
    code: Any
    pair: Any
    chosen: Any
    remove: Any
    check: Any
    note: Any


def build_workers_section() -> WorkersUi:
    gr.Markdown("### Workers", elem_id="workers-heading")
    table = gr.HTML("", elem_id="workers")
    with gr.Row(equal_height=True):
        address = gr.Textbox(label="Worker address", placeholder="192.168.1.20:50052", elem_id="worker-address")
        code = gr.Textbox(label="Pairing code", placeholder="ABCD-EFGH", elem_id="worker-code", max_length=20)
        pair = gr.Button("Pair", elem_id="pair-worker", scale=0, min_width=120)
    with gr.Row(equal_height=True):
        chosen = gr.Dropdown(choices=[], label="Paired worker", elem_id="worker-chosen", scale=2)
        remove = gr.Button("Remove", size="sm", elem_id="remove-worker", scale=0, min_width=120)
        check = gr.Button("Measure the links", size="sm", elem_id="check-workers", scale=0, min_width=170)
    note = gr.Markdown("", elem_id="workers-note")
    return WorkersUi(table, address, code, pair, chosen, remove, check, note)


class WorkersPanel:
    def __init__(self, workers_file: Any) -> None:
        self._book = WorkerBook(workers_file)

    def listing(self, measure: bool = False) -> tuple[str, Any]:
        """The table, asked now (with ``measure``, each link's bandwidth too), and the remove picker."""
        statuses = self._book.status(measure)
        addresses = [status.worker.address for status in statuses]
        picker = gr.update(choices=addresses, value=addresses[0] if addresses else None)
        return workers_html(statuses, time.strftime("%H:%M:%S")), picker

    def pair(self, address: str, code: str) -> tuple[str, str, Any, Any]:
        """Pair with the worker at ``address``; the code box is emptied either way (a code pairs once)."""
        if not address.strip() or not code.strip():
            return "Give the worker's address and the code it printed.", *self.listing(), gr.update()
        try:
            worker = self._book.add(address, code)
        except HearthError as exc:
            gr.Warning(exc.for_page, title="Not paired")
            return f"Not paired: {exc.for_page}", *self.listing(), gr.update(value="")
        facts = worker.facts
        note = pair_note(
            worker.address, facts.device, facts.free_bytes, worker.round_trip_ms, worker.bandwidth_bytes_per_s
        )
        return note, *self.listing(), gr.update(value="")

    def measured(self) -> tuple[str, Any]:
        return self.listing(measure=True)

    def remove(self, address: str | None) -> tuple[str, str, Any]:
        if not address:
            return "Pick a paired worker first.", *self.listing()
        try:
            gone = self._book.remove(address)
        except HearthError as exc:
            return f"Not removed: {exc.message}", *self.listing()
        return f"Removed the worker at `{gone.address}`; models loaded from now on do not use it.", *self.listing()


def wire_workers_section(
    panel: WorkersPanel, ui: WorkersUi, tab: Any, backend_picker: Callable[[], Any], backend_choice: Any
) -> None:
    """``backend_picker`` gives the backend picker again after a pairing or a removal (whether the split is
    offered depends on them)."""
    listing = [ui.table, ui.chosen]
    tab.select(panel.listing, outputs=listing, concurrency_id="workers")
    ui.check.click(panel.measured, outputs=listing, concurrency_id="workers")
    for trigger in (ui.pair.click, ui.code.submit):
        trigger(panel.pair, [ui.address, ui.code], [ui.note, *listing, ui.code], concurrency_id="workers").then(
            backend_picker, outputs=[backend_choice], queue=False
        )
    ui.remove.click(panel.remove, [ui.chosen], [ui.note, *listing], concurrency_id="workers").then(
        backend_picker, outputs=[backend_choice], queue=False
    )
