"""`hearth models …`: the model catalog from the terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.container import enforce_offline, model_choice
from app.services.models import ModelRow, model_rows, open_model_store
from app.settings import Settings
from backends.base import CancelToken
from backends.memory import format_bytes
from models.gguf import read_model_info
from models.store import ModelStore

EXIT_OK = 0
EXIT_INTERRUPTED = 130
FIT_MARK = {"green": "fits", "amber": "tight", "red": "too big"}
# The held-out text for perplexity: the Apache License 2.0, a real document anyone may copy verbatim.
HELDOUT_TEXT = Path(__file__).resolve().parent.parent / "models" / "data" / "heldout-apache-2.0.txt"


def _store(settings: Settings) -> ModelStore:
    enforce_offline()
    return open_model_store(ensure_data_dir(resolve_data_paths(settings.home)))


def run_list(settings: Settings, as_json: bool) -> int:
    from backends.hardware import probe

    store = _store(settings)
    try:
        rows = model_rows(store, probe(), model_choice(settings).prefs)
    finally:
        store.close()
    if as_json:
        print(json.dumps([_as_dict(row) for row in rows], indent=2, default=str))
        return EXIT_OK
    print(f"{'id':<13}{'':2}{'name':<34}{'arch':<9}{'params':>8}{'quant':>8}{'size':>10}{'context':>9}  fit")
    for row in rows:
        mark = "*" if row.is_default else " "
        if row.info is None:
            print(f"{row.stored.id:<13}{mark} {row.stored.path.name:<34}unreadable: {row.problem}")
            continue
        info = row.info
        print(
            f"{row.stored.id:<13}{mark} {info.name[:33]:<34}{info.architecture:<9}"
            f"{info.parameter_count / 1e6:>7.0f}M{info.quantization:>8}{format_bytes(info.file_size_bytes):>10}"
            f"{info.trained_context_length:>9}  {FIT_MARK[row.fit.level]} ({row.fit.level}): {row.fit.summary}"
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
    print(f"Imported {info.display_name} as {model.id} ({where}).")
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
        f"Removed {model.path.name} ({model.id})"
        + (", and deleted its file." if owned else "; the file was not touched.")
    )
    return EXIT_OK


def run_default(settings: Settings, reference: str) -> int:
    store = _store(settings)
    try:
        model = store.set_default(reference)
    finally:
        store.close()
    print(f"{model.path.name} ({model.id}) is now the default model; it loads the next time Hearth starts.")
    return EXIT_OK


def run_quantize(settings: Settings, reference: str, qtype: str, allow_requantize: bool) -> int:
    from backends.hardware import probe
    from models.quantize import check_request, output_name, quantize

    store = _store(settings)
    try:
        source = store.find(reference)
        info = read_model_info(source.path)
        for warning in check_request(info, qtype, allow_requantize):
            print(f"warning: {warning}", file=sys.stderr)
        target = store.models_dir / output_name(info, qtype)
        cancel = CancelToken()
        try:
            for progress in quantize(info, target, qtype, probe().physical_cores, cancel, allow_requantize):
                _progress(progress.message)
        except KeyboardInterrupt:
            cancel.cancel()
            print("\nStopped; nothing was saved.", file=sys.stderr)
            return EXIT_INTERRUPTED
        print(file=sys.stderr)
        model, made = store.add(target, source="quantized", parent=source.sha256)
    finally:
        store.close()
    print(f"Made {made.display_name}: {format_bytes(made.file_size_bytes)} as {model.id} ({model.path}).")
    return EXIT_OK


def run_convert(settings: Settings, reference: str, to: str) -> int:
    from models.convert import dequantize
    from models.quantize import output_name

    store = _store(settings)
    try:
        source = store.find(reference)
        target = store.models_dir / output_name(read_model_info(source.path), to)
        cancel = CancelToken()
        try:
            for _fraction, message in dequantize(source.path, target, to, cancel):
                _progress(message)
        except KeyboardInterrupt:
            cancel.cancel()
            print("\nStopped; nothing was saved.", file=sys.stderr)
            return EXIT_INTERRUPTED
        print(file=sys.stderr)
        model, made = store.add(target, source="converted", parent=source.sha256)
    finally:
        store.close()
    print(f"Made {made.display_name}: {format_bytes(made.file_size_bytes)} as {model.id} ({model.path}).")
    return EXIT_OK


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(f"\r\033[K{message}", end="", file=sys.stderr, flush=True)


def run_ladder(
    settings: Settings, reference: str, types: list[str], json_path: Path | None, chart_path: Path | None
) -> int:
    """Quantize (or reuse) each type from a full-precision source and measure every rung in one run."""
    import time

    from backends.hardware import probe
    from models.convert import dequantize
    from models.ladder import Rung, chart, measure
    from models.quantize import FULL_PRECISION, TYPES, QuantizeError, output_name, quantize

    unknown = [t for t in types if t not in TYPES]
    if unknown:
        raise QuantizeError(f"Unknown types: {', '.join(unknown)}.", f"Use some of: {', '.join(TYPES)}.")
    text = HELDOUT_TEXT.read_text()
    threads = probe().physical_cores
    store = _store(settings)
    cancel = CancelToken()
    try:
        original = store.find(reference)
        info = read_model_info(original.path)
        rungs_to_measure: list[tuple[str, Path]] = [(f"{info.quantization} (original)", original.path)]
        source = info
        if info.quantization not in FULL_PRECISION:
            full = store.models_dir / output_name(info, "F16")
            if not full.exists():
                for _fraction, message in dequantize(original.path, full, "F16", cancel):
                    _progress(message)
                store.add(full, source="converted", parent=original.sha256)
            source = read_model_info(full)
        for qtype in types:
            target = store.models_dir / output_name(source, qtype)
            if not target.exists():
                for progress in quantize(source, target, qtype, threads, cancel):
                    _progress(f"{qtype}: {progress.message}")
                store.add(target, source="quantized", parent=original.sha256)
            rungs_to_measure.append((qtype, target))
        rungs: list[Rung] = []
        for label, path in rungs_to_measure:
            _progress(f"Measuring {label} ({len(rungs) + 1}/{len(rungs_to_measure)})…")
            rungs.append(measure(path, label, text, threads))
    except KeyboardInterrupt:
        cancel.cancel()
        print("\nStopped.", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        store.close()
    print(file=sys.stderr)
    print(
        f"{info.name} on this machine ({threads} threads); perplexity over {rungs[0].scored_tokens} tokens of "
        f"{HELDOUT_TEXT.name}"
    )
    print(f"{'type':<18}{'size':>10}{'load s':>8}{'memory':>10}{'prefill t/s':>13}{'decode t/s':>12}{'perplexity':>12}")
    for rung in rungs:
        print(
            f"{rung.qtype:<18}{format_bytes(rung.file_bytes):>10}{rung.load_s:>8.2f}{format_bytes(rung.resident_bytes):>10}"
            f"{rung.prefill_tokens_per_s:>13.0f}{rung.decode_tokens_per_s:>12.1f}{rung.perplexity:>12.2f}"
        )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    ladders = resolve_data_paths(settings.home).root / "ladders"
    ladders.mkdir(parents=True, exist_ok=True)
    json_path = json_path or ladders / f"{info.name}-{stamp}.json"
    chart_path = chart_path or json_path.with_suffix(".png")
    from dataclasses import asdict

    json_path.write_text(
        json.dumps({"model": info.name, "threads": threads, "rungs": [asdict(r) for r in rungs]}, indent=2)
    )
    chart(rungs, info.name, chart_path)
    print(f"Saved {json_path} and {chart_path}")
    return EXIT_OK
