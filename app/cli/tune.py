"""``hearth tune`` and ``hearth adapters``: train a LoRA adapter for the chat model, list and remove adapters."""

from __future__ import annotations

import signal
import sys
import time
from contextlib import closing
from pathlib import Path

from app.paths import DataPaths, ensure_data_dir, resolve_data_paths
from app.services.training import tuning
from app.settings import Settings
from app.terminal_text import for_terminal
from backends.memory import format_bytes
from models.adapters import MODEL_SCOPE, collection_scope, conversation_scope, describe_scope
from models.shared.errors import HearthError
from models.tuning.options import Preset, TuneOptions, preset
from models.tuning.runs import RunError, RunFolder, RunResult, RunStats, RunView

EXIT_OK = 0
EXIT_FAILED = 1
_POLL_S = 0.5


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def base_model(settings: Settings, paths: DataPaths) -> tuning.BaseModel:
    """The model chat would load now (``--model``, else the default), with its content hash."""
    from app.services.container import model_choice

    return tuning.base_for(paths, model_choice(settings).path)


def tune_options(name: Preset, **changes: object) -> TuneOptions:
    return preset(name, **changes)


def run_tune(settings: Settings, data: Path | None, name: str | None, options: TuneOptions, resume: str | None) -> int:
    paths = ensure_data_dir(resolve_data_paths(settings.home))
    if resume:
        run = tuning.resume_run(paths, resume)
        _err(f"Resuming {run.id} from step {run.view().checkpoint_step}.")
    else:
        if data is None or not name:
            raise HearthError("Name the data and the adapter.", "hearth tune DATA.jsonl --name NAME")
        base = base_model(settings, paths)
        threads = settings.backend.threads or physical_cores()
        run = tuning.start_run(paths, base, data, name, options, threads)
        _err(f"Training adapter {name!r} for {for_terminal(base.name)} ({options.describe()}).")
        _err(f"Run {run.id}; Ctrl+C cancels (keeping a checkpoint to resume from).")
    return _follow(run)


def _follow(run: RunFolder) -> int:
    """Show the run as it goes; Ctrl+C, or SIGTERM (what `timeout` and `kill` send), cancels it at the end of the
    step and waits for the trainer to end, so no trainer is left behind."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _watch(run)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _watch(run: RunFolder) -> int:
    shown_phase, shown_step, shown_stats, shown_plan = "", 0, False, False
    try:
        while True:
            view = run.view()
            if view.stats is not None and not shown_stats:
                shown_stats = True
                _err(_stats_line(view.stats, view.total_steps))
            if view.plan is not None and not shown_plan:
                shown_plan = True
                memory = "GPU memory" if view.plan.where == "gpu" else "Memory"
                free = format_bytes(view.plan.available_bytes)
                _err(f"{memory}: about {view.plan.text}; {free} is free.")
            if view.phase != shown_phase:
                shown_phase = view.phase
                _err(f"… {view.phase}")
            if view.step != shown_step:
                shown_step = view.step
                _err(_step_line(view))
            if view.state not in ("running", "starting"):
                return _ended(run, view)
            time.sleep(_POLL_S)
    except KeyboardInterrupt:
        _err("\nCancelling at the end of this step…")
        tuning.cancel_run(run)
        while run.trainer_alive():
            time.sleep(_POLL_S)
        return _ended(run, run.view())


def _stats_line(s: RunStats, total_steps: int) -> str:
    held = f"{s.held_out} held out" if s.held_out else "none held out (fewer than 10)"
    extra = ""
    if s.cut:
        extra += f", {s.cut} cut to the max length"
    if s.dropped:
        extra += f", {s.dropped} dropped (their prompt alone fills the max length)"
    return (
        f"Data: {_count(s.examples, 'example')} ({s.train} to train on, {held}), {s.tokens} tokens, "
        f"{s.trained_tokens} of them answers to learn, longest {s.longest}{extra}. {total_steps} steps."
    )


def _step_line(view: RunView) -> str:
    point = view.steps[-1]
    eta = view.eta_s
    eta_text = f" · {_clock(eta)} left" if eta is not None else ""
    return f"step {point.step}/{view.total_steps} · loss {point.loss:.4f} · {point.tokens_per_s:.0f} tokens/s{eta_text}"


def _ended(run: RunFolder, view: RunView) -> int:
    if view.state == "finished":
        r = view.result or RunResult()
        print(
            f"Adapter {r.adapter!r} is ready: perplexity {r.perplexity_before or 0:.2f} -> "
            f"{r.perplexity_after or 0:.2f} through llama.cpp. Use it: hearth chat --adapter {r.adapter} …"
        )
        return EXIT_OK
    if view.state == "failed":
        error = view.error or RunError("the run failed")
        _err(f"error: {for_terminal(error.message)}")
        _err(f"  what to do: {for_terminal(error.remedy)}")
    elif view.state == "cancelled":
        _err(f"Cancelled at step {view.step}.")
    else:
        _err(f"The trainer stopped unexpectedly at step {view.step} (see {run.log_file}).")
    if view.resumable:
        _err(f"Resume from step {view.checkpoint_step}: hearth tune --resume {run.id}")
    return EXIT_FAILED


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else (f"{seconds // 60}:{seconds % 60:02d}")
    )


def physical_cores() -> int:
    from backends.hardware import probe

    return max(1, probe().physical_cores)


def run_adapters(
    settings: Settings,
    action: str,
    name: str | None,
    scale: float = 1.0,
    conversation: str | None = None,
    collection: str | None = None,
) -> int:
    paths = ensure_data_dir(resolve_data_paths(settings.home))
    store = tuning.adapter_store(paths)
    if action == "remove":
        if not name:
            raise HearthError("Which adapter?", "hearth adapters remove NAME")
        removed = store.remove(name)
        print(f"Removed adapter {removed.name!r}.")
        return EXIT_OK
    if action in ("attach", "detach"):
        scope, where = _scope(paths, conversation, collection)
        if action == "detach":
            gone = store.detach(scope)
            print(f"Detached {gone.name!r} from {where}." if gone else f"No adapter was attached to {where}.")
            return EXIT_OK
        if not name:
            raise HearthError("Which adapter?", "hearth adapters attach NAME [--conversation ID | --collection NAME]")
        record = tuning.attach(paths, name, scale, base_model(settings, paths), scope)
        print(f"Attached {record.name!r} (scale {scale:g}) to {where}, from the next answer on.")
        return EXIT_OK
    records = store.all()
    if not records:
        print("No adapters yet. Train one: hearth tune DATA.jsonl --name NAME")
        return EXIT_OK
    attachments = store.attachments()
    for record in records:
        made = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created_at))
        print(f"{record.name}  for {for_terminal(record.base_name)}  ({made})")
        print(f"    {record.summary()}")
        print(f"    {record.settings}")
        for attachment in attachments.values():
            if attachment.name == record.name:
                print(f"    attached to {for_terminal(describe_scope(attachment.scope))} (scale {attachment.scale:g})")
    return EXIT_OK


def _scope(paths: DataPaths, conversation: str | None, collection: str | None) -> tuple[str, str]:
    """The scope named on the command line, checked to exist, and how to say it."""
    if conversation:
        from app.services.library.conversations import ConversationStore

        with closing(ConversationStore(paths.conversations_db)) as store:
            title = store.get(conversation).title
        return conversation_scope(conversation), f"the conversation {title!r}"
    if collection:
        from rag.manifest import Manifest

        with closing(Manifest(paths.index_db)) as manifest:
            found = manifest.get(collection).name
        return collection_scope(found), f"the collection {found!r}"
    return MODEL_SCOPE, "every answer"
