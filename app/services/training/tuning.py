"""Tuning as the page and the CLI use it: start a run in its own process, watch it, cancel it, resume it, and
turn an adapter's name into what an answer needs (checked against the model in use)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from app.paths import DataPaths
from backends.base import AdapterUse
from backends.child_env import child_environment
from backends.hardware import HardwareInventory
from models.adapters import (
    MODEL_SCOPE,
    AdapterRecord,
    AdapterStore,
    Attachment,
    check_name,
    choose_attachment,
    scopes_for,
)
from models.gguf import read_model_info
from models.shared.errors import AdapterError, DoesNotFit, TrainingDataError, TuningError
from models.tuning.dataset import read_examples
from models.tuning.lora_gguf import TUNABLE_ARCHITECTURES
from models.tuning.options import TuneOptions, check_options, total_steps
from models.tuning.placement import SMALLEST_WINDOW, GpuRoom, choose_placement
from models.tuning.plan import TrainingPlan, check_fits, plan_gpu_training
from models.tuning.prepare import available_memory, prepare_data, shape_of
from models.tuning.runs import Job, RunError, RunFolder, RunStats


@dataclass(frozen=True)
class BaseModel:
    """The model an adapter is trained for: its file, its content hash and its name as the user knows it."""

    path: Path
    sha256: str
    name: str


def base_for(paths: DataPaths, path: Path) -> BaseModel:
    """The model at ``path`` as a base to tune, with its content hash (computed once, then remembered)."""
    from app.services.catalog.models import open_model_store

    store = open_model_store(paths)
    try:
        info = store.model_info(path)
        return BaseModel(path, store.sha256_for(path), info.display_name)
    finally:
        store.close()


@dataclass(frozen=True)
class DataCheck:
    """What the page shows before a run: the data's figures, where it would train, and the memory plan against
    what is free there."""

    stats: RunStats
    plan: TrainingPlan
    available_bytes: int
    does_not_fit: DoesNotFit | None
    where: str = "on the CPU"  # Placement.describe(): "on NVIDIA … (bfloat16, all 30 layers on the GPU)"
    on_gpu: bool = False


def check_data(base: BaseModel, data: Path, options: TuneOptions, room: GpuRoom | None = None) -> DataCheck:
    """Validate, split and tokenize ``data`` for ``base`` and plan the run's memory (on the GPU ``room`` describes,
    when there is one, as the trainer would); bad data raises."""
    check_options(options)
    prepared = prepare_data(data, base.path, options)
    if len(prepared.train.items) < options.batch_size:
        raise TrainingDataError(
            f"There are {len(prepared.train.items)} examples to train on; one batch takes {options.batch_size}.",
            "Add examples, or lower the batch size.",
        )
    longest = prepared.train.longest
    stats = prepared.stats(options)
    try:
        placement = choose_placement(shape_of(base.path), options, longest, room, options.device)
    except DoesNotFit as exc:
        plan = plan_gpu_training(shape_of(base.path), options, options.batch_size, longest, 2, SMALLEST_WINDOW)
        return DataCheck(stats, plan, room.free_bytes if room else 0, exc, "on the GPU", True)
    if placement.where == "gpu":
        return DataCheck(stats, placement.plan, placement.gpu_free_bytes, None, placement.describe(), True)
    available = available_memory()
    try:
        check_fits(placement.plan, options, available, longest)
        refused = None
    except DoesNotFit as exc:
        refused = exc
    return DataCheck(stats, placement.plan, available, refused, placement.describe())


def gpu_room(inventory: HardwareInventory, options: TuneOptions) -> GpuRoom | None:
    """The GPU the trainer would use, as NVML sees it, when the installed torch can use it (a "+cpu" build
    cannot); None to train on the CPU. The trainer asks torch itself when it starts."""
    if options.device == "cpu" or not inventory.gpus:
        return None
    import importlib.metadata

    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    if torch_version.endswith("+cpu"):
        return None
    gpu = inventory.gpus[0]
    return GpuRoom.capped(gpu.name, gpu.free_bytes, gpu.compute_capability >= (8, 0), options.gpu_memory_mib)


PROBE_STEPS = 4  # the first warms up; the pace is that of the rest


@dataclass(frozen=True)
class Probe:
    load_s: float
    step_s: float
    tokens_per_s: float
    total_steps: int

    @property
    def training_s(self) -> float:
        return self.step_s * self.total_steps


def probe_run(
    paths: DataPaths, base: BaseModel, data: Path, options: TuneOptions, threads: int, stop: Callable[[], bool]
) -> Iterator[str | Probe]:
    """Time a few real steps of the run in a trainer of its own (yielding its phases, then the :class:`Probe`);
    nothing of it is kept. ``stop`` cancels it."""
    folder = paths.tuning_dir / ".probes" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns()}"
    run = RunFolder(folder)
    folder.mkdir(parents=True)
    try:
        shutil.copyfile(data, run.data_file)
        probe_options = replace(options, max_steps=None)
        job = Job(
            "probe",
            str(base.path),
            base.sha256,
            base.name,
            data.name,
            probe_options,
            max(1, threads),
            "",
            probe_steps=PROBE_STEPS,
        )
        run.job_file.write_text(job.to_json(), encoding="utf-8")
        launch(run)
        shown = ""
        while True:
            view = run.view()
            if view.phase != shown:
                shown = view.phase
                yield shown
            if view.state == "finished" and view.probe is not None:
                total = total_steps(options, view.stats.train if view.stats else 0)
                yield Probe(view.probe.load_s, view.probe.step_s, view.probe.tokens_per_s, total)
                return
            if view.state not in ("running", "starting"):
                error = view.error or RunError()
                message = error.message or "The measuring run stopped."
                raise TuningError(message, error.remedy or f"See {run.log_file}.")
            if stop():
                cancel_run(run)
                raise TuningError("Measuring was cancelled.", "Measure again when you are ready.")
            time.sleep(0.25)
    finally:
        cancel_run(run)
        _wait_gone(run, 10.0)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_gone(run: RunFolder, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while run.trainer_alive() and time.monotonic() < deadline:
        time.sleep(0.1)


def adapter_store(paths: DataPaths) -> AdapterStore:
    return AdapterStore(paths.adapters_dir)


def start_run(
    paths: DataPaths,
    base: BaseModel,
    data: Path,
    name: str,
    options: TuneOptions,
    threads: int,
    label: str = "",
    estimated_s: float | None = None,
) -> RunFolder:
    """Check everything that can be checked at once (name, data, settings, model), then start the trainer.
    ``estimated_s``: the run's time as estimated before it started, kept with it to be checked against its steps."""
    check_name(name)
    if adapter_store(paths).exists(name):
        raise AdapterError(f"An adapter named {name!r} already exists.", "Pick another name, or remove that one.")
    busy = [run for run in list_runs(paths) if run.job().adapter_name == name and run.trainer_alive()]
    if busy:
        raise TuningError(f"A run for {name!r} is already training.", "Wait for it, or cancel it first.")
    check_options(options)
    read_examples(data)  # the first bad line is reported now, not from the trainer a minute later
    info = read_model_info(base.path)
    architecture = info.architecture
    if info.parts > 1:  # transformers reads a model for training from one GGUF file
        raise TuningError(
            f"{base.name} is split into {info.parts} files, and Hearth tunes a model kept in one.",
            "Merge its parts into one file with llama.cpp's llama-gguf-split --merge and add that file, or tune "
            "another model.",
            page_remedy="Merge its parts into one file with llama.cpp's gguf-split tool and import that file, or pick "
            "another model to tune.",
        )
    if architecture not in TUNABLE_ARCHITECTURES:
        raise TuningError(
            f"Hearth cannot tune {architecture} models yet ({base.name}).",
            f"Tune a model of one of these architectures: {', '.join(TUNABLE_ARCHITECTURES)} "
            "(SmolLM2 and Qwen2.5 models, for example).",
        )
    run = RunFolder(paths.tuning_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{name}")
    run.path.mkdir(parents=True)
    try:
        shutil.copyfile(data, run.data_file)
        job = Job(
            adapter_name=name,
            base_path=str(base.path),
            base_sha256=base.sha256,
            base_name=base.name,
            data_label=label or data.name,
            options=options,
            threads=max(1, threads),
            adapters_dir=str(paths.adapters_dir),
            estimated_s=estimated_s,
        )
        run.job_file.write_text(job.to_json(), encoding="utf-8")
    except OSError as exc:
        shutil.rmtree(run.path, ignore_errors=True)
        problem = f"Cannot prepare the run: {exc.strerror or exc}."
        raise TuningError(problem, "Check free space in the data folder.") from exc
    launch(run)
    return run


def launch(run: RunFolder) -> subprocess.Popen[bytes]:
    """Start (or restart) the trainer for ``run``. It runs in a session of its own: it outlives the page or the
    command that started it, which find it again in the run folder."""
    env = child_environment(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1")
    with run.log_file.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "models.tuning.worker", str(run.path)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    # The pid is written here too, so the run reads as alive from its first moment.
    run.mark_trainer(process.pid)
    return process


def resume_run(paths: DataPaths, run_id: str) -> RunFolder:
    run = find_run(paths, run_id)
    view = run.view()
    if view.state in ("running", "starting"):
        raise TuningError(f"The run {run.id} is still training.", "Watch it, or cancel it first.")
    if view.state == "finished":
        raise TuningError(
            f"The run {run.id} has finished.",
            "Its adapter is listed under `hearth adapters`.",
            page_remedy="Its adapter is listed under Adapters.",
        )
    if adapter_store(paths).exists(run.job().adapter_name):
        raise AdapterError(
            f"An adapter named {run.job().adapter_name!r} exists now.", "Remove it first, or start a new run."
        )
    launch(run)
    return run


def cancel_run(run: RunFolder) -> None:
    """Ask the trainer to stop at the end of its current step (it saves a checkpoint first)."""
    run.cancel_file.touch()
    pid = run.trainer_pid()
    if pid is not None and run.trainer_alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def list_runs(paths: DataPaths) -> list[RunFolder]:
    """Every run, newest first."""
    if not paths.tuning_dir.is_dir():
        return []
    runs = [RunFolder(p) for p in paths.tuning_dir.iterdir() if (p / "job.json").is_file()]
    return sorted(runs, key=lambda run: run.id, reverse=True)


def find_run(paths: DataPaths, run_id: str) -> RunFolder:
    runs = list_runs(paths)
    matches = [run for run in runs if run.id == run_id] or [run for run in runs if run.id.startswith(run_id)]
    if len(matches) != 1:
        shown = ", ".join(run.id for run in runs[:5]) or "none"
        raise TuningError(f"No single run matches {run_id!r} (recent runs: {shown}).", "Name a run from that list.")
    return matches[0]


def adapter_for(paths: DataPaths, name: str, model_sha256: str, scale: float = 1.0) -> tuple[AdapterRecord, AdapterUse]:
    """The adapter ``name`` ready to answer with, once it is known to belong to the model in use."""
    if not 0.0 <= scale <= 1.0:
        raise AdapterError(f"An adapter scale of {scale} is out of range.", "Use 0 to 1 (1 is the adapter as trained).")
    record = adapter_store(paths).get(name)
    if record.base_sha256 != model_sha256:
        raise AdapterError(
            f"The adapter {name!r} was trained for {record.base_name}, not for the model in use.",
            f"Switch to {record.base_name} (the Models tab, or hearth use), or tune an adapter for this model.",
            page_remedy=f"Pick {record.base_name} in the Models tab and press Use for chat, or tune an adapter for "
            "this model.",
        )
    try:
        version = record.path.stat().st_mtime_ns
    except OSError:
        missing = f"The adapter file of {name!r} is missing."
        raise AdapterError(missing, "Remove the adapter and train it again.") from None
    return record, AdapterUse(str(record.path), scale, version, record.name)


def attach(paths: DataPaths, name: str, scale: float, model: BaseModel, scope: str = MODEL_SCOPE) -> AdapterRecord:
    """Attach adapter ``name`` to ``model`` (the one in use) for ``scope``: every answer (``model``), one
    conversation's or one collection's answers use it from the next one on."""
    record, _ = adapter_for(paths, name, model.sha256, scale)
    adapter_store(paths).attach(Attachment(record.name, scale, str(model.path), scope))
    return record


def attached_use(
    paths: DataPaths, model_path: Path, conversation_id: str | None = None, collection: str | None = None
) -> AdapterUse | None:
    """What an answer from ``model_path`` needs of the adapter attached for it (its conversation's, else its
    collection's, else the one for every answer), or None."""
    store = adapter_store(paths)
    attachment = choose_attachment(store.attachments(), scopes_for(conversation_id, collection), str(model_path))
    if attachment is None:
        return None
    try:
        record = store.get(attachment.name)
        version = record.path.stat().st_mtime_ns
    except (AdapterError, OSError):
        return None
    return AdapterUse(str(record.path), attachment.scale, version, record.name)


def forget_scope(paths: DataPaths, scope: str) -> None:
    """Drop the attachment made for a conversation or a collection that was deleted (a new collection of the same
    name starts without it)."""
    adapter_store(paths).detach(scope)
