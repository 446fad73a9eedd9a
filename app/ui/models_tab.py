"""The Models tab: the catalog with what fits here and which model chat uses (and why), installable packaged
models, import, use for chat, remove, quantize and the ladder. Wiring only: the work is in ``app.services``, the
words and tables in ``app.ui.models_view``.

Every handler answers in a message next to the control that was pressed, never with an error dialog: an error
raised from a handler would mark every output of the event (the table, the picker) as failed until the page is
reloaded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.services.catalog.installs import InstallJobs, InstallState
from app.services.catalog.models import (
    HELDOUT_TEXT,
    Made,
    ModelRow,
    ModelsChanged,
    import_typed_path,
    make_quantized,
    model_rows,
    open_model_store,
    run_ladder,
)
from app.services.container import Services
from app.ui import cancel_button
from app.ui import models_view as view
from app.ui.hub_panel import HubPanel
from app.ui.models_layout import (
    REMOVE_COPIES,
    ModelsTab,
)
from app.ui.page_uploads import PageUploads
from app.ui.status_line import page_status
from backends.base import CancelSlot
from backends.memory import format_bytes
from models.catalog import CATALOG
from models.gguf import read_model_info
from models.ladder import DEFAULT_RUNS, Rung, chart, noise_warning
from models.quantize import QuantizeWarning
from models.shared.errors import HearthError, LoadCancelled
from models.store import ModelStore

log = logging.getLogger(__name__)


def keep_ticking() -> Any:
    """An update for the page's status timer that keeps it running (it stops itself once nothing loads)."""
    return gr.update(active=True)


class ModelsPanel:
    def __init__(self, services: Services, uploads: PageUploads) -> None:
        self.services = services
        self.uploads = uploads
        self._current = CancelSlot()
        self.installs = InstallJobs(services.paths)
        self.hub = HubPanel(services, self.installs, self._store)

    def _store(self) -> ModelStore:
        return open_model_store(self.services.paths)

    # --- the catalog ------------------------------------------------------------------------------------------

    def _rows(self) -> list[ModelRow]:
        store = self._store()
        try:
            return model_rows(store, self.services.inventory, self.services.control.preferences)
        finally:
            store.close()

    def view(self, selected: str | None = None) -> tuple[Any, ...]:
        """(which model is in use and why, the table, the picker)."""
        try:
            rows = self._rows()
        except HearthError as exc:  # a damaged catalog: say how to repair it, leave the rest as it is
            return exc.for_page, gr.update(), gr.update()
        choices = view.model_choices(rows)
        ids = [value for _, value in choices]
        loaded = self.services.runtime.model
        loaded_path = loaded.path if loaded is not None else None
        row = next((r for r in rows if r.stored.path == loaded_path), None)
        name = view.model_name(row) if row is not None else (loaded.display_name if loaded is not None else None)
        in_use = view.in_use_line(name, self.services.control.why)
        table = view.model_table(rows, loaded_path)
        return in_use, table, gr.update(choices=choices, value=selected if selected in ids else None)

    def first_view(self) -> tuple[Any, ...]:
        """The tab as it opens: the catalog, the packaged models, and the hub's section."""
        return (*self.view(), self.install_view(), *self.hub.first_view())

    def import_model(self, path_text: str, uploaded: str | None) -> tuple[Any, ...]:
        if not (path_text or "").strip() and not uploaded:
            return "Type the path of a .gguf file, or drop one in the box.", *self._unchanged(), gr.update(), None
        store = self._store()
        try:
            # An upload lives in a temporary folder: keep a copy. A path on this computer is used where it is.
            if uploaded:
                stored, info = store.add(self.uploads.checked([uploaded])[0], copy=True)
            else:
                stored, info = import_typed_path(store, path_text)  # its answers reveal nothing of other paths
        except HearthError as exc:
            return view.page_message(exc), *self._unchanged(), gr.update(), gr.update()
        finally:
            store.close()
        return f"Imported {info.display_name} ({stored.id}).", *self.view(stored.id), "", None

    def use(self, model_id: str | None) -> Iterator[tuple[Any, ...]]:
        """Load the model for chat, with progress (after the answers being written); once it has loaded it
        becomes the user's choice. Each update keeps the page's status timer running, so the status line follows
        the load even while it makes no progress of its own."""
        if not model_id:
            yield "Pick a model in the Model list first.", *self._unchanged(), gr.update(), gr.update(), gr.update()
            return
        # Cancel loading, only while it loads (made pressable once, so a press stays shown as the load goes on).
        loading, done = cancel_button.ready("Cancel loading"), cancel_button.hidden()
        try:
            for progress in self.services.control.use_model(model_id):
                yield (
                    f"{progress.fraction:.0%} — {progress.message}",
                    *self._unchanged(),
                    self._status(),
                    keep_ticking(),
                    loading,
                )
                loading = gr.update()
        except LoadCancelled as exc:
            yield f"{exc.message} {self._serving()}", *self._unchanged(), self._status(), keep_ticking(), done
            return
        except HearthError as exc:
            yield (
                f"Could not load it: {exc.message} {self._serving()}",
                *self._unchanged(),
                self._status(),
                keep_ticking(),
                done,
            )
            return
        yield "Chat now uses it (and will after a restart).", *self.view(model_id), self._status(), keep_ticking(), done

    def cancel_load(self) -> Any:
        """(Cancel loading): the load's own stream ends with what became of it."""
        return cancel_button.pressed() if self.services.control.cancel_load() else cancel_button.hidden()

    def remove(self, model_id: str | None) -> tuple[Any, ...]:
        if not model_id:
            return "Pick a model in the Model list first.", *self._unchanged()
        loaded = self.services.runtime.model
        store = self._store()
        try:
            stored = store.find(model_id)
            if loaded is not None and loaded.path.resolve() == stored.path.resolve():
                return "That model is the one chat is using: use another one first.", *self._unchanged()
            owned = store.owns(stored.path)
            store.remove(model_id)
        except HearthError as exc:
            return view.page_message(exc), *self._unchanged()
        finally:
            store.close()
        done = f"Removed {stored.path.name}" + (" and deleted its file." if owned else "; the file was kept.")
        return done, *self.view()

    # --- installing ---------------------------------------------------------------------------------------------

    def install_view(self) -> list[list[Any]]:
        store = self._store()
        try:
            known = {m.sha256: m for m in store.all()}
        except HearthError:
            known = {}
        finally:
            store.close()
        installed = {k: known[m.sha256].id for k, m in CATALOG.items() if m.sha256 in known}
        fits: dict[str, str] = {}
        if installed:
            try:
                rows = {row.stored.sha256: row for row in self._rows()}
            except HearthError:
                rows = {}
            for key, model in CATALOG.items():
                row = rows.get(model.sha256)
                if row is not None and row.info is not None:
                    fits[key] = f"{view.FIT_WORDS[row.fit.level]}: {row.fit.summary}"
        return view.install_table(list(CATALOG.values()), installed, fits, self.services.inventory.ram_available_bytes)

    def install(self, key: str | None) -> tuple[Any, ...]:
        """Start installing in the background; the install timer follows it."""
        if not key:
            return "Pick a packaged model in the list first.", gr.update(), gr.update()
        try:
            state = self.installs.start(key)
        except HearthError as exc:
            return view.page_message(exc), gr.update(), gr.update()
        return f"Installing {state.title}: starting…", gr.update(active=True), cancel_button.ready("Cancel install")

    def cancel_install(self) -> Any:
        """(Cancel install): the install's line says so on the timer's next beat."""
        return cancel_button.pressed() if self.installs.cancel() else cancel_button.hidden()

    def install_tick(self) -> tuple[Any, ...]:
        """(progress, packaged models, in use, models table, picker, timer, Cancel install, the hub's line, its
        table, Stop download): drawn again once the job ends; the Cancel of the section that started it only while
        it runs."""
        state = self.installs.state()
        hidden = gr.update(visible=False)
        if state is None:
            return (
                "",
                gr.update(),
                *self._unchanged(),
                gr.update(active=False),
                hidden,
                gr.update(),
                gr.update(),
                hidden,
            )
        line = install_line(state)
        if state.running:
            cancel = gr.update(visible=True)
            if state.from_hub:
                return (
                    gr.update(),
                    gr.update(),
                    *self._unchanged(),
                    gr.update(active=True),
                    hidden,
                    line,
                    gr.update(),
                    cancel,
                )
            return (
                line,
                gr.update(),
                *self._unchanged(),
                gr.update(active=True),
                cancel,
                gr.update(),
                gr.update(),
                hidden,
            )
        selected = state.installed.id if state.installed is not None else None
        drawn = (*self.view(selected), gr.update(active=False), hidden)
        if state.from_hub:
            return gr.update(), gr.update(), *drawn, line, self.hub.table(), hidden
        return line, self.install_view(), *drawn, gr.update(), gr.update(), hidden

    # --- quantize and the ladder ---------------------------------------------------------------------------------

    def quantize_note(self, model_id: str | None, qtype: str) -> str:
        if not model_id:
            return view.quantize_note(None, qtype)
        store = self._store()
        try:
            info = read_model_info(store.find(model_id).path)
        except HearthError as exc:
            return view.page_message(exc)
        finally:
            store.close()
        return view.quantize_note(info, qtype)

    def cancel(self) -> None:
        self._current.cancel()

    def quantize(self, model_id: str | None, qtype: str, allow_requantize: bool) -> Iterator[tuple[Any, ...]]:
        if not model_id:
            yield "Pick a model to quantize in the Model list first.", *self._unchanged()
            return
        cancel = self._current.start()
        store = self._store()
        warnings: list[str] = []
        try:
            steps = make_quantized(
                store, model_id, qtype, self.services.inventory.physical_cores, cancel, allow_requantize
            )
            for step in steps:
                if isinstance(step, Made):
                    made = (
                        f"Made {step.info.display_name} ({step.stored.id}), {format_bytes(step.info.file_size_bytes)}."
                    )
                    yield " ".join([made, *warnings]), *self.view(step.stored.id)
                elif isinstance(step, QuantizeWarning):
                    warnings.append(step.message)
                    yield " ".join(warnings), *self._unchanged()
                else:
                    yield " ".join([step.message, *warnings]), *self._unchanged()
        except HearthError as exc:
            yield view.page_message(exc), *self._unchanged()
        finally:
            store.close()

    def ladder(self, model_id: str | None, types: list[str], runs: float, copies: str) -> Iterator[tuple[Any, ...]]:
        """(ladder progress, ladder table, chart, in use, models table, picker)."""
        unchanged = (gr.update(), gr.update(), *self._unchanged())
        if not model_id:
            yield "Pick a model in the Model list first.", *unchanged
            return
        if not types:
            yield "Tick at least one of the ladder types.", *unchanged
            return
        cancel = self._current.start()
        store = self._store()
        rungs: list[Rung] = []
        runs = int(runs or DEFAULT_RUNS)
        try:
            name = store.find(model_id).path.stem
            steps = run_ladder(
                store,
                model_id,
                types,
                self.services.inventory.physical_cores,
                HELDOUT_TEXT.read_text(),
                cancel,
                runs=runs,
                keep_copies=copies != REMOVE_COPIES,
            )
            for step in steps:
                if isinstance(step, Rung):
                    rungs.append(step)
                    yield f"Measured {step.qtype}.", view.ladder_table(rungs), gr.update(), *self._unchanged()
                elif isinstance(step, ModelsChanged):
                    yield step.message, gr.update(), gr.update(), *self.view(model_id)
                else:
                    yield step, *unchanged
        except HearthError as exc:
            yield view.page_message(exc), gr.update(), gr.update(), *self.view(model_id)
            return
        finally:
            store.close()
        if not rungs or cancel.cancelled:
            yield "Cancelled.", gr.update(), gr.update(), *self.view(model_id)
            return
        folder = self.services.paths.ladders_dir
        folder.mkdir(parents=True, exist_ok=True)
        image = chart(rungs, name, folder / f"{name}.png")
        done = f"Done: {len(rungs)} rungs measured on this machine, {runs} runs each (median and range)."
        noise = noise_warning(rungs)
        yield (
            " ".join([done, *([f"⚠ {noise}"] if noise else [])]),
            view.ladder_table(rungs),
            str(image),
            *self.view(model_id),
        )

    # --- helpers -----------------------------------------------------------------------------------------------

    @staticmethod
    def _unchanged() -> tuple[Any, Any, Any]:
        return gr.update(), gr.update(), gr.update()

    def _serving(self) -> str:
        model = self.services.runtime.model
        return f"Chat still uses {model.display_name}." if model is not None else "No model is loaded; pick one."

    def _status(self) -> str:
        return page_status(self.services)


SWITCH_HERE = (
    "Chat uses the best installed model that fits from the next start, unless you choose one: to switch now, pick it "
    "in the Model list and press Use for chat."
)


def install_line(state: InstallState, then: str = SWITCH_HERE) -> str:
    """An install's progress or outcome in words; ``then``: what to do once it is installed."""
    if state.running:
        picked = f" (picked {state.picked})" if state.picked else ""
        return f"Installing {state.title}{picked} ({state.elapsed_s:.0f} s): {state.message}"
    if state.error:
        return f"Could not install {state.title}: {state.error}"
    if state.cancelled:
        return state.message
    if state.installed is not None:
        return f"Installed {state.title} as {state.installed.id} in {state.elapsed_s:.1f} s. {then}".rstrip()
    return state.message


def wire_models_tab(panel: ModelsPanel, ui: ModelsTab, status: Any, timer: Any) -> None:
    """Connect the tab's events; ``status`` and ``timer`` are the page's status line and its timer."""
    catalog = [ui.in_use, ui.table, ui.pick]
    ui.tab.select(panel.first_view, outputs=[*catalog, ui.install_table, ui.hub_table, ui.hub_pick, ui.hub_progress])
    ui.import_button.click(
        panel.import_model,
        [ui.import_path, ui.import_file],
        [ui.import_message, *catalog, ui.import_path, ui.import_file],
    )
    ui.use.click(panel.use, [ui.pick], [ui.progress, *catalog, status, timer, ui.cancel_use], concurrency_id="switch")
    ui.cancel_use.click(panel.cancel_load, outputs=[ui.cancel_use], queue=False)
    ui.remove.click(panel.remove, [ui.pick], [ui.progress, *catalog])
    # Installing runs in a background thread; the timer draws its progress, so the page stays usable.
    ui.install.click(panel.install, [ui.install_pick], [ui.install_progress, ui.install_timer, ui.cancel_install])
    ui.cancel_install.click(panel.cancel_install, outputs=[ui.cancel_install], queue=False)
    ui.hub_search.click(panel.hub.search, [ui.hub_query], [ui.hub_progress, ui.hub_table, ui.hub_pick])
    ui.hub_query.submit(panel.hub.search, [ui.hub_query], [ui.hub_progress, ui.hub_table, ui.hub_pick])
    ui.hub_install.click(panel.hub.install, [ui.hub_pick], [ui.hub_progress, ui.install_timer, ui.cancel_hub])
    ui.cancel_hub.click(panel.cancel_install, outputs=[ui.cancel_hub], queue=False)
    ui.install_timer.tick(
        panel.install_tick,
        outputs=[
            *(ui.install_progress, ui.install_table, *catalog, ui.install_timer, ui.cancel_install),
            *(ui.hub_progress, ui.hub_table, ui.cancel_hub),
        ],
        show_progress="hidden",
    )
    for trigger in (ui.pick.change, ui.qtype.change):
        trigger(panel.quantize_note, [ui.pick, ui.qtype], [ui.quantize_note], show_progress="hidden")
    ui.quantize.click(
        panel.quantize,
        [ui.pick, ui.qtype, ui.allow_requantize],
        [ui.quantize_progress, *catalog],
        concurrency_id="models",
    )
    ui.ladder.click(
        panel.ladder,
        [ui.pick, ui.ladder_types, ui.ladder_runs, ui.ladder_copies],
        [ui.ladder_progress, ui.ladder_table, ui.ladder_chart, *catalog],
        concurrency_id="models",
    )
    ui.cancel_job.click(panel.cancel, queue=False)
