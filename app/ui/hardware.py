"""The Hardware tab: what Hearth sees, the plan it chose and why, and a switch of backend or device (the model
reloads, with progress). Wiring only; the text and bars come from ``app.ui.hardware_view``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.errors import HearthError
from app.services.container import Services
from app.ui.hardware_view import device_choices, inventory_markdown, plan_html
from app.ui.models_tab import keep_ticking
from app.ui.render import status_markdown


class HardwarePanel:
    def __init__(self, services: Services) -> None:
        self.services = services

    def view(self) -> tuple[Any, ...]:
        prefs = self.services.control.preferences
        status = self.services.runtime.status
        return (
            inventory_markdown(self.services.inventory),
            plan_html(status.plan, status.message),
            gr.update(value=prefs.backend),
            gr.update(choices=device_choices(self.services.inventory), value=prefs.device),
        )

    def switch(self, backend: str, device: str) -> Iterator[tuple[Any, ...]]:
        """Reload the model on the chosen backend and device, after the answers being written. If the choice
        cannot work here, say why and keep the current model running."""
        try:
            for progress in self.services.control.switch_backend(backend, device):
                yield f"{progress.fraction:.0%} — {progress.message}", gr.update(), self._status(), keep_ticking()
        except HearthError as exc:
            gr.Warning(f"{exc.message} {exc.remedy}", title="Could not switch")
            status = self.services.runtime.status
            yield f"Not switched: {exc.message}", plan_html(status.plan, status.message), self._status(), keep_ticking()
            return
        status = self.services.runtime.status
        label = status.plan.label if status.plan else "nothing"
        yield f"Now running on {label}.", plan_html(status.plan, status.message), self._status(), keep_ticking()

    def _status(self) -> str:
        return status_markdown(self.services.runtime.status)
