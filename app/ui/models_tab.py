"""The Models tab: the catalog with what fits here, import, use for chat, remove, quantize and the ladder.
Wiring only: the work is in ``app.services.models`` and the tables come from ``app.ui.models_view``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from app.errors import HearthError, LoadCancelled
from app.services.container import Services
from app.services.models import (
    HELDOUT_TEXT,
    Made,
    import_typed_path,
    make_quantized,
    model_rows,
    open_model_store,
    run_ladder,
)
from app.ui.errors import as_gradio_error
from app.ui.models_view import ladder_table, model_choices, model_table
from app.ui.render import status_markdown
from backends.base import CancelSlot
from models.ladder import Rung, chart
from models.store import ModelStore


def keep_ticking() -> Any:
    """An update for the page's status timer that keeps it running (it stops itself once nothing loads)."""
    return gr.update(active=True)


class ModelsPanel:
    def __init__(self, services: Services) -> None:
        self.services = services
        self._current = CancelSlot()

    def _store(self) -> ModelStore:
        return open_model_store(self.services.paths)

    def cancel(self) -> None:
        self._current.cancel()

    def view(self, selected: str | None = None) -> tuple[Any, ...]:
        store = self._store()
        try:
            rows = model_rows(store, self.services.inventory, self.services.control.preferences)
        except HearthError as exc:  # a damaged catalog: the dialog says how to repair it
            raise as_gradio_error(exc) from exc
        finally:
            store.close()
        choices = model_choices(rows)
        ids = [value for _, value in choices]
        return model_table(rows), gr.update(choices=choices, value=selected if selected in ids else None)

    def import_model(self, path_text: str, uploaded: str | None) -> tuple[Any, ...]:
        if not path_text.strip() and not uploaded:
            raise gr.Error("Type the path of a .gguf file, or drop one in the box.", title="Hearth")
        store = self._store()
        try:
            # An upload lives in a temporary folder: keep a copy. A path on this computer is used where it is.
            if uploaded:
                stored, info = store.add(Path(uploaded), copy=True)
            else:
                stored, info = import_typed_path(store, path_text)  # its answers reveal nothing of other paths
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        finally:
            store.close()
        gr.Info(f"Imported {info.display_name} ({stored.id}).", duration=5)
        return (*self.view(stored.id), "", None)

    def use(self, model_id: str | None) -> Iterator[tuple[Any, ...]]:
        """Load the model for chat, with progress (after the answers being written); once it has loaded it
        becomes the default. Each update keeps the page's status timer running, so the status line follows the load
        even while it makes no progress of its own."""
        if not model_id:
            raise gr.Error("Pick a model first.", title="Hearth")
        unchanged = (gr.update(), gr.update())
        try:
            for progress in self.services.control.use_model(model_id):
                yield f"{progress.fraction:.0%} — {progress.message}", *unchanged, self._status(), keep_ticking()
        except LoadCancelled as exc:
            yield f"{exc.message} {self._serving()}", *unchanged, self._status(), keep_ticking()
            return
        except HearthError as exc:
            yield f"Could not load it: {exc.message} {self._serving()}", *unchanged, self._status(), keep_ticking()
            return
        yield "Chat now uses it (and will after a restart).", *self.view(model_id), self._status(), keep_ticking()

    def cancel_load(self) -> str:
        if self.services.control.cancel_load():
            return "Cancelling the load…"
        return "No model is loading."

    def remove(self, model_id: str | None) -> tuple[Any, ...]:
        if not model_id:
            raise gr.Error("Pick a model first.", title="Hearth")
        loaded = self.services.runtime.model
        store = self._store()
        try:
            stored = store.find(model_id)
            if loaded is not None and loaded.path.resolve() == stored.path.resolve():
                raise gr.Error("That model is the one chat is using.", title="Hearth")
            owned = store.owns(stored.path)
            store.remove(model_id)
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        finally:
            store.close()
        gr.Info(f"Removed {stored.path.name}" + (" and deleted its file." if owned else "; the file was kept."))
        return self.view()

    def quantize(self, model_id: str | None, qtype: str, allow_requantize: bool) -> Iterator[tuple[Any, ...]]:
        if not model_id:
            raise gr.Error("Pick a model to quantize first.", title="Hearth")
        cancel = self._current.start()
        store = self._store()
        try:
            steps = make_quantized(
                store, model_id, qtype, self.services.inventory.physical_cores, cancel, allow_requantize
            )
            for step in steps:
                if isinstance(step, Made):
                    yield f"Made {step.info.display_name} ({step.stored.id}).", *self.view(step.stored.id)
                elif step.startswith("warning: "):
                    gr.Warning(step.removeprefix("warning: "))
                else:
                    yield step, gr.update(), gr.update()
        except HearthError as exc:
            yield f"{exc.message} {exc.remedy}", gr.update(), gr.update()
        finally:
            store.close()

    def ladder(self, model_id: str | None, types: list[str]) -> Iterator[tuple[Any, ...]]:
        if not model_id:
            raise gr.Error("Pick a model first.", title="Hearth")
        if not types:
            raise gr.Error("Tick at least one type.", title="Hearth")
        cancel = self._current.start()
        store = self._store()
        rungs: list[Rung] = []
        try:
            name = store.find(model_id).path.stem
            steps = run_ladder(
                store, model_id, types, self.services.inventory.physical_cores, HELDOUT_TEXT.read_text(), cancel
            )
            for step in steps:
                if isinstance(step, Rung):
                    rungs.append(step)
                    yield f"Measured {step.qtype}.", ladder_table(rungs), gr.update()
                else:
                    yield step, gr.update(), gr.update()
        except HearthError as exc:
            yield f"{exc.message} {exc.remedy}", gr.update(), gr.update()
            return
        finally:
            store.close()
        if not rungs:
            yield "Cancelled.", gr.update(), gr.update()
            return
        folder = self.services.paths.root / "ladders"
        folder.mkdir(parents=True, exist_ok=True)
        image = chart(rungs, name, folder / f"{name}.png")
        yield f"Done: {len(rungs)} rungs measured on this machine.", ladder_table(rungs), str(image)

    def _serving(self) -> str:
        model = self.services.runtime.model
        return f"Chat still uses {model.display_name}." if model is not None else "No model is loaded; pick one."

    def _status(self) -> str:
        return status_markdown(self.services.runtime.status)
