"""The Hardware tab: what Hearth sees, the plan it chose and why, and a switch of backend or device (the model
reloads, with progress). Wiring only; the text and bars come from ``app.ui.hardware_view``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.services.container import Services
from app.ui.api_panel import api_section
from app.ui.bench_section import BenchPanel, BenchUi, build_bench_section, wire_bench_section
from app.ui.elapsed import with_elapsed
from app.ui.hardware_view import (
    BACKEND_CHOICES,
    backend_choices,
    device_choices,
    inventory_markdown,
    plan_html,
    switch_progress_text,
)
from app.ui.models_tab import keep_ticking
from app.ui.status_line import page_status
from app.ui.workers import WorkersPanel, WorkersUi, build_workers_section, wire_workers_section
from backends.hardware import with_current_memory
from models.shared.errors import HearthError


class HardwarePanel:
    def __init__(self, services: Services) -> None:
        self.services = services

    def view(self) -> tuple[Any, ...]:
        """The tab as it opens: the machine with free memory read now, the plan, and pickers set to what runs."""
        status = self.services.runtime.status
        return (
            self.machine(),
            plan_html(status.plan, status.message, status.slots),
            *self._pickers(choices=True),
        )

    def machine(self) -> str:
        inventory = with_current_memory(self.services.inventory)
        return inventory_markdown(inventory, time.strftime("%H:%M:%S"))

    def switch(self, backend: str, device: str) -> Iterator[tuple[Any, ...]]:
        """Reload the model on the chosen backend and device, after the answers being written, with the seconds
        each step has taken. If the choice cannot work here, say why, keep the current model running and set the
        pickers back to what runs."""
        unchanged = (gr.update(), gr.update(), gr.update())
        try:
            for tick in with_elapsed(self.services.control.switch_backend(backend, device)):
                message = tick.step.message if tick.step is not None else "Starting"
                text = switch_progress_text(message, tick.elapsed_s)
                yield text, gr.update(), self._status(), keep_ticking(), *unchanged
        except HearthError as exc:
            gr.Warning(exc.for_page, title="Could not switch")
            status = self.services.runtime.status
            yield (
                f"Not switched: {exc.message}",
                plan_html(status.plan, status.message, status.slots),
                self._status(),
                keep_ticking(),
                *self._pickers(),
                self.machine(),
            )
            return
        status = self.services.runtime.status
        label = status.plan.label if status.plan else "nothing"
        yield (
            f"Now running on {label}.",
            plan_html(status.plan, status.message, status.slots),
            self._status(),
            keep_ticking(),
            *self._pickers(),
            self.machine(),
        )

    def _pickers(self, choices: bool = False) -> tuple[Any, Any]:
        """The backend and device pickers set to what is in use (with every choice labelled when ``choices``)."""
        prefs = self.services.control.preferences
        inventory = self.services.inventory
        if not choices:
            return gr.update(value=prefs.backend), gr.update(value=prefs.device)
        return (
            gr.update(choices=backend_choices(inventory, self._paired_workers()), value=prefs.backend),
            gr.update(choices=device_choices(inventory), value=prefs.device),
        )

    def backend_picker(self) -> Any:
        """The backend picker with its choices labelled again (pairing a worker makes the split available)."""
        return self._pickers(choices=True)[0]

    def _paired_workers(self) -> int:
        from app.services.workers import WorkerBook

        return len(WorkerBook(self.services.paths.workers_file).paired())

    def _status(self) -> str:
        return page_status(self.services)


@dataclass
class HardwareUi:
    tab: Any
    machine: Any
    refresh: Any
    plan: Any
    backend: Any
    device: Any
    switch: Any
    switch_progress: Any
    workers: WorkersUi
    bench: BenchUi


def build_hardware_tab(services: Services) -> HardwareUi:
    with gr.Tab("Hardware", id="hardware-tab", elem_id="hardware-tab") as tab:
        machine = gr.Markdown("", elem_id="machine")
        with gr.Row():
            refresh = gr.Button("Read free memory again", size="sm", scale=0, min_width=200, elem_id="refresh-machine")
        plan_view = gr.HTML("", elem_id="plan")
        with gr.Row(equal_height=True):
            backend = gr.Dropdown(
                choices=BACKEND_CHOICES, value="auto", label="Backend", elem_id="backend-choice", scale=2
            )
            device = gr.Dropdown(
                choices=[("Automatic", "auto")], value="auto", label="Device", elem_id="device-choice", scale=2
            )
            switch = gr.Button("Use these (reloads the model)", elem_id="switch", scale=1)
        switch_progress = gr.Markdown("", elem_id="switch-progress")
        workers = build_workers_section()
        bench = build_bench_section()
        api_section(services)
    return HardwareUi(tab, machine, refresh, plan_view, backend, device, switch, switch_progress, workers, bench)


def wire_hardware_tab(hardware: HardwarePanel, ui: HardwareUi, services: Services, status: Any, timer: Any) -> None:
    """A switch waits for the answers being written; one switch at a time."""
    ui.tab.select(hardware.view, outputs=[ui.machine, ui.plan, ui.backend, ui.device])
    ui.refresh.click(hardware.machine, outputs=[ui.machine], queue=False)
    sizes = services.settings.bench
    bench = BenchPanel(
        services.paths.root / "benchmarks", lambda: services.control.choice.path, sizes.users, sizes.max_tokens
    )
    wire_bench_section(bench, ui.bench, ui.tab)
    workers = WorkersPanel(services.paths.workers_file)
    wire_workers_section(workers, ui.workers, ui.tab, hardware.backend_picker, ui.backend)
    ui.switch.click(
        hardware.switch,
        [ui.backend, ui.device],
        [ui.switch_progress, ui.plan, status, timer, ui.backend, ui.device, ui.machine],
        concurrency_id="switch",
    )
