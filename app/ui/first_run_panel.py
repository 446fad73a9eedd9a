"""The note above the chat while the embedded model answers, with Install (or Use it) for the recommended model.
Wiring only: what it says is ``first_run``; the install is the Models tab's own job (one install at a time), and
switching is the control service's, as the Models tab's Use for chat."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.services.catalog.installs import InstallJobs
from app.services.catalog.models import open_model_store
from app.services.container import Services
from app.ui import cancel_button
from app.ui.first_run import FirstRun, first_run
from app.ui.models_tab import install_line
from app.ui.safe_markdown import literal
from models.catalog import CATALOG, RUNTIME_OVERHEAD
from models.hub_catalog import HUB_CATALOG, best_fitting
from models.shared.errors import HearthError, LoadCancelled, ModelFileError

POLL_S = 1.0


@dataclass(frozen=True)
class FirstRunUi:
    row: Any
    text: Any
    install: Any
    cancel: Any
    use: Any
    progress: Any
    timer: Any

    def view_outputs(self) -> list[Any]:
        return [self.row, self.text, self.install, self.use]


def build_first_run() -> FirstRunUi:
    """The note's layout (hidden until the page loads and the embedded model is the one answering)."""
    with gr.Row(visible=False, equal_height=False, elem_id="first-run") as row:
        text = gr.Markdown("", elem_id="first-run-text")
        install = gr.Button(
            "Install it", variant="primary", size="sm", scale=0, min_width=110, elem_id="first-run-install"
        )
        cancel = gr.Button(
            "Cancel", variant="stop", size="sm", scale=0, min_width=90, visible=False, elem_id="first-run-cancel"
        )
        use = gr.Button(
            "Use it for chat",
            variant="primary",
            size="sm",
            scale=0,
            min_width=140,
            visible=False,
            elem_id="first-run-use",
        )
    progress = gr.Markdown("", elem_id="first-run-progress")
    timer = gr.Timer(POLL_S, active=False)
    return FirstRunUi(row, text, install, cancel, use, progress, timer)


class FirstRunPanel:
    def __init__(self, services: Services, installs: InstallJobs) -> None:
        self.services = services
        self.installs = installs
        self.recommended = CATALOG[services.settings.model.recommended]

    def note(self) -> FirstRun | None:
        from models.embedded import embedded_chat_model

        choice = self.services.runtime.choice
        try:
            embedded = embedded_chat_model()
        except ModelFileError:
            return None
        larger = best_fitting(
            HUB_CATALOG.values(),
            self.services.inventory.ram_available_bytes,
            RUNTIME_OVERHEAD,
            self.recommended.size_bytes,
        )
        return first_run(choice.path if choice else None, embedded, self.recommended, self._installed_id(), larger)

    def _installed_id(self) -> str | None:
        try:
            store = open_model_store(self.services.paths)
        except HearthError:
            return None
        try:
            stored = store.by_sha256(self.recommended.sha256)
        except HearthError:
            return None
        finally:
            store.close()
        return stored.id if stored is not None and stored.path.exists() else None

    def view(self) -> tuple[Any, ...]:
        """The row, its text, Install and Use it, as the model in use and the catalog say now."""
        note = self.note()
        if note is None:
            hidden = gr.update(visible=False)
            return hidden, "", hidden, hidden
        installing = self._running()
        return (
            gr.update(visible=True),
            note.text,
            gr.update(visible=note.install and not installing),
            gr.update(visible=note.use_id is not None),
        )

    def _running(self) -> bool:
        state = self.installs.state()
        return state is not None and state.running

    def install(self) -> tuple[Any, ...]:
        """Start installing the recommended model (outputs: progress, timer, Install, Cancel)."""
        try:
            state = self.installs.start(self.recommended.key)
        except HearthError as exc:
            return literal(exc.for_page), gr.update(), gr.update(), gr.update()
        hide_install = gr.update(visible=False)
        return install_line(state, then=""), gr.update(active=True), hide_install, cancel_button.ready("Cancel")

    def cancel(self) -> Any:
        """(Cancel): the install's line says so on the timer's next beat."""
        return cancel_button.pressed() if self.installs.cancel() else cancel_button.hidden()

    def tick(self) -> tuple[Any, ...]:
        """The install's progress (outputs: progress, timer, Cancel, then the row as ``view``); once it ends, the
        note offers to use the model."""
        state = self.installs.state()
        if state is None:
            return "", gr.update(active=False), gr.update(visible=False), *self.view()
        if state.running:
            return install_line(state, then=""), gr.update(active=True), gr.update(visible=True), *_unchanged(4)
        return install_line(state, then=""), gr.update(active=False), gr.update(visible=False), *self.view()

    def use(self) -> Iterator[tuple[Any, ...]]:
        """Load the recommended model for chat, with progress (outputs: progress, then the row as ``view``)."""
        note = self.note()
        if note is None or note.use_id is None:
            yield "", *self.view()
            return
        try:
            for step in self.services.control.use_model(note.use_id):
                yield f"Loading {literal(self.recommended.title)}: {step.fraction:.0%}", *_unchanged(4)
        except LoadCancelled as exc:
            yield literal(exc.message), *self.view()
            return
        except HearthError as exc:
            yield f"It could not be loaded: {literal(exc.for_page)}", *self.view()
            return
        yield f"Chat now uses {literal(self.recommended.title)}.", *self.view()


def wire_first_run(
    panel: FirstRunPanel,
    ui: FirstRunUi,
    shown: list[Any],
    status: Callable[[], tuple[Any, ...]],
    status_outputs: list[Any],
) -> None:
    """Drawn by each of the ``shown`` events (the page's load, the Chat tab's selection); its buttons install,
    cancel and switch; after a switch, ``status`` draws the page's status line (``status_outputs``)."""
    for event in shown:
        event(panel.view, outputs=ui.view_outputs(), queue=False)
    ui.install.click(panel.install, outputs=[ui.progress, ui.timer, ui.install, ui.cancel], queue=False)
    ui.cancel.click(panel.cancel, outputs=[ui.cancel], queue=False)
    ui.timer.tick(panel.tick, outputs=[ui.progress, ui.timer, ui.cancel, *ui.view_outputs()], show_progress="hidden")
    ui.use.click(panel.use, outputs=[ui.progress, *ui.view_outputs()], concurrency_id="switch").then(
        status, outputs=status_outputs, queue=False
    )


def _unchanged(count: int) -> tuple[Any, ...]:
    return tuple(gr.skip() for _ in range(count))
