"""The Tuning tab: pick the data (a JSON Lines file, saved conversations or a collection's passages), check it
and estimate the run (memory plan, a few measured steps), train a LoRA adapter in a process of its own and watch
it (progress, tokens/s, loss chart), cancel or resume it, and use the adapters (attach one to the running model
at a scale, remove one). Wiring only: the work is in ``app.services.training.tuning``, the words in ``tuning_view``.

Like the Models tab, every handler answers in a message beside its control, never with an error dialog. A run
lives in its folder, not in the page: a reload, or another tab, finds it again and draws its chart from there.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from app.services.answering.compare import compare_answers
from app.services.container import Services
from app.services.training import tuning
from app.services.training.tuning_data import from_conversations, from_passages
from app.services.training.tuning_estimate import estimate_run
from app.ui import tuning_view as view
from app.ui.page_uploads import PageUploads
from app.ui.tuning_layout import (
    FROM_COLLECTION,
    FROM_CONVERSATIONS,
    FROM_FILE,
    NO_RUN,
    TuningTab,
)
from backends import registry
from models.adapters import MODEL_SCOPE
from models.shared.errors import HearthError, TrainingDataError
from models.tuning.options import PRESETS, TuneOptions
from models.tuning.prepare import shape_of
from models.tuning.runs import RunFolder

log = logging.getLogger(__name__)


def _preset_values(options: TuneOptions) -> list[Any]:
    return [
        options.rank,
        options.alpha,
        list(options.targets),
        options.learning_rate,
        options.epochs,
        options.max_steps or 0,
        options.max_length,
        options.batch_size,
        options.gradient_checkpointing,
    ]


def _problem(exc: HearthError) -> str:
    return f"**{exc.message}** {exc.page_remedy or exc.remedy}"


class TuningPanel:
    def __init__(self, services: Services, uploads: PageUploads) -> None:
        self.services = services
        self.uploads = uploads
        self._probe_stop = threading.Event()
        # The last time shown for a run, by model, data and settings: a run started with the same ones keeps it, and
        # its progress sets it beside what its steps measure.
        self._estimated: tuple[tuple[str, str, TuneOptions], float] | None = None

    def _remember(self, base: tuning.BaseModel, label: str, options: TuneOptions, seconds: float) -> None:
        self._estimated = ((base.sha256, label, options), seconds)

    def _estimate_for(self, base: tuning.BaseModel, label: str, options: TuneOptions) -> float | None:
        if self._estimated is None or self._estimated[0] != (base.sha256, label, options):
            return None
        return self._estimated[1]

    @property
    def paths(self) -> Any:
        return self.services.paths

    def _base(self) -> tuning.BaseModel:
        return tuning.base_for(self.paths, self.services.control.choice.path)

    def _threads(self) -> int:
        from app.cli.tune import physical_cores

        return self.services.settings.backend.threads or physical_cores()

    # --- the tab as it opens ------------------------------------------------------------------------------------

    def first_view(self) -> tuple[Any, ...]:
        """(base line, conversations, collections, run picker, progress, chart, cancel, resume, timer, adapters,
        adapter picker, adapter target, adapter message)."""
        try:
            base = self._base()
            base_line = f"Adapters are trained for the model in use: **{base.name}**."
        except HearthError as exc:
            base_line = _problem(exc)
        conversations = [(c.title, c.id) for c in self.services.store.list() if c.message_count >= 2]
        collections = self._collection_names()
        runs = self._run_choices()
        chosen = runs[0][1] if runs else None
        return (
            base_line,
            gr.update(choices=conversations),
            gr.update(choices=collections, value=collections[0] if collections else None),
            gr.update(choices=runs, value=chosen),
            *self.run_view(chosen),
            *self.adapters_view(),
        )

    def _run_choices(self) -> list[tuple[str, str]]:
        found = []
        for run in tuning.list_runs(self.paths)[:20]:
            try:
                found.append((run.id, run.job().adapter_name, run.view()))
            except (OSError, ValueError, TypeError, KeyError):
                continue  # a run folder whose job cannot be read is not offered
        return view.run_choices(found)

    # --- data and settings ---------------------------------------------------------------------------------------

    @staticmethod
    def source_changed(source: str) -> tuple[Any, ...]:
        return (
            gr.update(visible=source == FROM_FILE),
            gr.update(visible=source == FROM_CONVERSATIONS),
            gr.update(visible=source == FROM_COLLECTION),
        )

    @staticmethod
    def preset_changed(name: str) -> list[Any]:
        return _preset_values(PRESETS.get(name, PRESETS["quick"]))  # type: ignore[call-overload]

    def _data(self, source: str, data_file: str | None, chosen: list[str], collection: str | None) -> tuple[Path, str]:
        """The examples as a JSON Lines file, and words for where they came from."""
        folder = self.paths.tuning_dir / ".sources" / f"{time.monotonic_ns()}"
        if source == FROM_CONVERSATIONS:
            return from_conversations(folder, list(chosen or []), self.services.store.get)
        if source == FROM_COLLECTION:
            if not collection:
                raise TrainingDataError("No collection was chosen.", "Pick the collection to learn from.")
            documents = self.services.documents.get()
            return from_passages(folder, collection, documents.passages(collection))
        if not data_file:
            raise TrainingDataError("No file was chosen.", "Drop a .jsonl file of examples above.")
        (path,) = self.uploads.checked([data_file], "Drop the file of examples into the Tuning tab's box again.")
        return path, path.name

    def check(self, source: str, data_file: str | None, chosen: list[str], collection: str | None,
              preset_name: str, *fields: Any) -> Iterator[tuple[str, str]]:  # fmt: skip
        """(check, measurement): validate the data, plan the memory and estimate the time, in seconds; an earlier
        measurement no longer applies and is cleared."""
        data: Path | None = None
        try:
            options = view.options_from_fields(preset_name, *fields)
            base = self._base()
            yield "Reading and tokenizing the examples…", ""
            data, label = self._data(source, data_file, chosen, collection)
            checked = tuning.check_data(base, data, options, tuning.gpu_room(self.services.inventory, options))
            shown = (
                f"**Data** ({label}): " + view.data_summary(checked.stats) + "\n\n"
                + view.memory_summary(
                    checked.plan.total_bytes,
                    checked.available_bytes,
                    checked.plan.describe(),
                    _problem(checked.does_not_fit) if checked.does_not_fit else "",
                    checked.where if checked.on_gpu else "",
                )
            )  # fmt: skip
            if checked.does_not_fit:
                yield shown, ""
                return
            if checked.on_gpu:
                yield shown + "\n\n" + view.estimate_summary(None, on_gpu=True), ""
                return
            yield shown + "\n\n**Time**: estimating…", ""
            parameters = shape_of(base.path).parameters
            threads = self._threads()
            estimate = estimate_run(self.paths, base.sha256, parameters, checked.stats, options, threads)
            if estimate is not None:
                self._remember(base, label, options, estimate.total_s)
            yield shown + "\n\n" + view.estimate_summary(estimate), ""
        except HearthError as exc:
            yield _problem(exc), ""
        finally:
            self._discard_source(data)

    def measure(self, source: str, data_file: str | None, chosen: list[str], collection: str | None,
                preset_name: str, *fields: Any) -> Iterator[str]:  # fmt: skip
        """Time a few real steps of the run in a trainer of its own (the model loads as for the run)."""
        self._probe_stop.clear()
        data: Path | None = None
        try:
            options = view.options_from_fields(preset_name, *fields)
            base = self._base()
            yield "**Measured time**: reading the examples…"
            data, label = self._data(source, data_file, chosen, collection)
            checked = tuning.check_data(base, data, options, tuning.gpu_room(self.services.inventory, options))
            if checked.does_not_fit:
                yield _problem(checked.does_not_fit)
                return
            for step in tuning.probe_run(self.paths, base, data, options, self._threads(), self._probe_stop.is_set):
                if isinstance(step, tuning.Probe):
                    self._remember(base, label, options, step.load_s + step.training_s)
                    yield view.time_summary(step.load_s, step.step_s, step.tokens_per_s, step.total_steps)
                else:
                    yield f"**Measured time**: timing a few real steps… ({step})"
        except HearthError as exc:
            # Start training ends a measurement under way (the run needs the machine): not a problem to report.
            yield "Training started, so the measurement stopped." if self._probe_stop.is_set() else _problem(exc)
        finally:
            self._discard_source(data)

    def _discard_source(self, data: Path | None) -> None:
        sources = self.paths.tuning_dir / ".sources"
        if data is not None and sources in data.parents:
            shutil.rmtree(data.parent, ignore_errors=True)

    def start(self, source: str, data_file: str | None, chosen: list[str], collection: str | None, name: str,
              preset_name: str, *fields: Any) -> tuple[Any, ...]:  # fmt: skip
        """(check message, run picker, then the run's view) for a run just started, or the reason it was not."""
        self._probe_stop.set()  # a measurement still under way gives the machine to the run
        data: Path | None = None
        try:
            options = view.options_from_fields(preset_name, *fields)
            base = self._base()
            data, label = self._data(source, data_file, chosen, collection)
            estimated = self._estimate_for(base, label, options)
            name = (name or "").strip()
            run = tuning.start_run(self.paths, base, data, name, options, self._threads(), label, estimated)
        except HearthError as exc:
            return (_problem(exc), gr.update(), *([gr.update()] * 5))
        finally:
            self._discard_source(data)
        return ("", gr.update(choices=self._run_choices(), value=run.id), *self.run_view(run.id))

    # --- a run ----------------------------------------------------------------------------------------------------

    def _run(self, run_id: str | None) -> RunFolder | None:
        if not run_id:
            return None
        try:
            return tuning.find_run(self.paths, run_id)
        except HearthError:
            return None

    def run_view(self, run_id: str | None) -> tuple[Any, ...]:
        """(progress, chart, cancel, resume, timer) for the run ``run_id``."""
        run = self._run(run_id)
        if run is None:
            return NO_RUN, "", gr.update(visible=False), gr.update(visible=False), gr.update(active=False)
        state, job = run.view(), run.job()
        live = state.state in ("running", "starting")
        return (
            view.progress_line(run.id, job.adapter_name, state, job.estimated_s),
            view.chart(state),
            gr.update(visible=live),
            gr.update(visible=state.resumable),
            gr.update(active=live),
        )

    def tick(self, run_id: str | None) -> tuple[Any, ...]:
        """The run's view; when it has just ended, the adapters too (a finished run has added one) and the run
        picker (whose label says the run's state)."""
        shown = self.run_view(run_id)
        ended = not shown[-1]["active"]
        adapters = self.adapters_view() if ended else (gr.update(),) * 4
        picker = gr.update(choices=self._run_choices(), value=run_id) if ended else gr.update()
        return (*shown, *adapters, picker)

    def cancel(self, run_id: str | None) -> str:
        run = self._run(run_id)
        if run is None:
            return NO_RUN
        tuning.cancel_run(run)
        return f"Cancelling run {run.id}: it stops after this step and keeps a checkpoint to resume from…"

    def resume(self, run_id: str | None) -> tuple[Any, ...]:
        try:
            run = tuning.resume_run(self.paths, run_id or "")
        except HearthError as exc:
            return (_problem(exc), *([gr.update()] * 4))
        return self.run_view(run.id)

    # --- adapters -------------------------------------------------------------------------------------------------

    def adapters_view(self, selected: str | None = None, target: str | None = None) -> tuple[Any, ...]:
        """(table, picker, target, what is attached)."""
        store = tuning.adapter_store(self.paths)
        records = store.all()
        names = [r.name for r in records]
        attachments = store.attachments()
        everywhere = attachments.get(MODEL_SCOPE)
        if selected not in names:
            selected = everywhere.name if everywhere is not None else (names[-1] if names else None)
        plan = self.services.runtime.status.plan
        backend = registry.ALL.get(plan.backend) if plan is not None else None
        model_path = self.services.control.choice.path
        line = view.attached_line(
            everywhere.name if everywhere is not None else None,
            everywhere.scale if everywhere is not None else 1.0,
            everywhere is not None and Path(everywhere.base_path) == model_path,
            plan.label if plan is not None else "",
            backend is None or backend.capabilities.lora_hot_swap,
        )
        titles, collections = self._scope_names()
        narrower = view.scoped_lines(list(attachments.values()), titles, str(model_path))
        targets = view.target_choices(collections, titles)
        if target not in {value for _, value in targets}:
            target = MODEL_SCOPE
        if everywhere is None and narrower:
            line = "No adapter is attached for every answer."
        shown = line + ("\n\n" + narrower if narrower else "")
        picker = gr.update(choices=names, value=selected)
        return view.adapter_rows(records), picker, gr.update(choices=targets, value=target), shown

    def _scope_names(self) -> tuple[dict[str, str], list[str]]:
        """Conversation titles by id (newest first) and collection names: where an adapter can be attached."""
        try:
            titles = {c.id: c.title for c in self.services.store.list()[: view.TARGET_CONVERSATIONS]}
        except HearthError:
            titles = {}
        return titles, self._collection_names()

    def _collection_names(self) -> list[str]:
        """The collections' names; none when the documents store cannot be read (the Documents tab says why)."""
        try:
            return [info.name for info in self.services.documents.get().manifest.collections()]
        except HearthError:
            return []

    def attach(self, name: str | None, scale: float, target: str | None) -> tuple[Any, ...]:
        if not name:
            return gr.update(), gr.update(), gr.update(), "Pick an adapter to attach."
        scope = target or MODEL_SCOPE
        try:
            tuning.attach(self.paths, name, float(scale), self._base(), scope)
        except HearthError as exc:
            return gr.update(), gr.update(), gr.update(), _problem(exc)
        table, picker, targets, line = self.adapters_view(name, scope)
        return table, picker, targets, f"{line}\n\nIt takes effect from the next answer; the model was not reloaded."

    def compare(self, name: str | None, scale: float, question: str) -> Iterator[tuple[str, str, str]]:
        """(without, with, a note when both came out the same) as both answers are written."""
        if not name:
            yield "Pick an adapter under Adapters to compare with.", "", ""
            return
        if not (question or "").strip():
            yield "Type a question to ask both ways.", "", ""
            return
        try:
            _, use = tuning.adapter_for(self.paths, name, self._base().sha256, float(scale))
            params = self.services.generation_params()
            system = self.services.settings.generation.system_prompt
            side = None
            for side in compare_answers(self.services.runtime, question.strip(), system, params, use):
                yield (
                    side.without + (" …" if side.writing == "without" else ""),
                    side.with_adapter + (" …" if side.writing == "with" else ""),
                    "",
                )
            if side is not None:
                yield side.without, side.with_adapter, view.compare_note(side.without, side.with_adapter, float(scale))
        except HearthError as exc:
            yield exc.for_page, "", ""

    def detach(self, target: str | None) -> tuple[Any, ...]:
        tuning.adapter_store(self.paths).detach(target or MODEL_SCOPE)
        return self.adapters_view(target=target)

    def remove(self, name: str | None) -> tuple[Any, ...]:
        if not name:
            return gr.update(), gr.update(), gr.update(), "Pick an adapter to remove."
        try:
            tuning.adapter_store(self.paths).remove(name)
        except HearthError as exc:
            return gr.update(), gr.update(), gr.update(), _problem(exc)
        table, picker, targets, line = self.adapters_view()
        return table, picker, targets, f"Removed {name}. {line}"


def wire_tuning_tab(
    panel: TuningPanel, ui: TuningTab, status: Callable[[], tuple[Any, ...]], status_outputs: list[Any]
) -> None:
    """Connect the tab's events; ``status`` draws the page's status line (``status_outputs``), which names the
    adapter every answer uses, after an adapter is attached, detached or removed."""
    run_outputs = [ui.progress, ui.chart, ui.cancel, ui.resume, ui.timer]
    adapter_outputs = ui.adapters.outputs
    ui.tab.select(
        panel.first_view,
        outputs=[ui.base_line, ui.conversations, ui.collection, ui.run_pick, *run_outputs, *adapter_outputs],
    )
    ui.source.change(panel.source_changed, [ui.source], [ui.data_file, ui.conversations, ui.collection], queue=False)
    ui.preset.change(panel.preset_changed, [ui.preset], ui.fields, queue=False)
    data_inputs = [ui.source, ui.data_file, ui.conversations, ui.collection]
    ui.check.click(
        panel.check, [*data_inputs, ui.preset, *ui.fields], [ui.check_view, ui.measure_view], concurrency_id="tuning"
    )
    ui.measure.click(panel.measure, [*data_inputs, ui.preset, *ui.fields], [ui.measure_view], concurrency_id="tuning")
    # Not in the "tuning" queue: starting a run ends a measurement that is still under way.
    ui.start.click(
        panel.start, [*data_inputs, ui.name, ui.preset, *ui.fields], [ui.check_view, ui.run_pick, *run_outputs]
    )
    ui.run_pick.input(panel.run_view, [ui.run_pick], run_outputs)
    ui.timer.tick(panel.tick, [ui.run_pick], [*run_outputs, *adapter_outputs, ui.run_pick], show_progress="hidden")
    ui.cancel.click(panel.cancel, [ui.run_pick], [ui.progress], queue=False)
    ui.resume.click(panel.resume, [ui.run_pick], run_outputs)
    controls = ui.adapters
    controls.attach.click(panel.attach, [controls.pick, controls.scale, controls.target], adapter_outputs).then(
        status, outputs=status_outputs, queue=False
    )
    controls.detach.click(panel.detach, [controls.target], adapter_outputs).then(
        status, outputs=status_outputs, queue=False
    )
    compare = ui.compare
    compare_inputs = [controls.pick, controls.scale, compare.question]
    compare_outputs = [compare.without, compare.with_adapter, compare.note]
    compare.ask.click(panel.compare, compare_inputs, compare_outputs)
    compare.question.submit(panel.compare, compare_inputs, compare_outputs)
    controls.remove.click(lambda: gr.update(visible=True), outputs=[controls.confirm_row], queue=False)
    controls.keep.click(lambda: gr.update(visible=False), outputs=[controls.confirm_row], queue=False)
    controls.confirm_remove.click(panel.remove, [controls.pick], adapter_outputs).then(
        lambda: gr.update(visible=False), outputs=[controls.confirm_row], queue=False
    ).then(status, outputs=status_outputs, queue=False)
