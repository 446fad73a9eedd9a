"""What each CLI command does, given loaded settings. Output goes to stdout; progress and stats to stderr."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.reading_pace import ReadingPace
from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services, build_services, enforce_offline, model_choice
from app.services.serving.instance import ServerRecord, remove_record, write_record
from app.settings import Settings
from app.terminal_text import for_terminal, for_terminal_lines
from backends.base import Finished, Reading, TextDelta, Usage
from backends.hardware import HardwareInventory, describe, probe
from backends.memory import format_bytes
from models.shared.errors import HearthError
from rag.prompt import Source

if TYPE_CHECKING:
    from backends.plan import Preferences
    from models.gguf import ModelInfo

EXIT_OK = 0


class ProgressLine:
    """One line of progress on stderr: redrawn in place on a terminal; in a log, printed when it changes other than
    in its counts."""

    def __init__(self, interactive: bool) -> None:
        self._interactive = interactive
        self._drawn = False
        self._last_shape = ""

    def show(self, line: str) -> None:
        line = for_terminal(line)
        if self._interactive:
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
            self._drawn = True
            return
        shape = "".join(c for c in line if not c.isdigit())
        if shape != self._last_shape:
            self._last_shape = shape
            print(line, file=sys.stderr, flush=True)

    def clear(self) -> None:
        if self._drawn:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
            self._drawn = False


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def load_model(services: Services) -> None:
    """Load the configured model, printing progress to stderr."""
    for progress in services.control.start():
        _err(f"[{progress.fraction:4.0%}] {progress.message}")


def run_ui(settings: Settings, open_browser: bool) -> int:
    from app.api.policy import is_loopback
    from app.ui.app import launch
    from app.ui.open_page import REDIRECT_FILE, open_in_browser
    from app.ui.page_files import remove_page_files

    host, port = settings.server.host, settings.server.port
    ensure_port_free(host, port)
    _repair_damaged_stores(settings)
    services = build_services(settings)
    if not is_loopback(host):
        _err(
            f"WARNING: binding to {host} makes Hearth reachable from other machines. Anyone who can reach "
            "this port can chat with your model and read your conversations. Use 127.0.0.1 unless you mean it."
        )
        _err("The page and the API ask for the API key there (`hearth api-key` prints it).")
    for line in describe(services.inventory):
        _err(line)
    _err(f"Chat model: {for_terminal(services.control.initial.path.name)} ({services.control.why}).")
    try:
        server = launch(services)
    except OSError as exc:
        raise HearthError(
            f"Cannot start the web UI on {host}:{port}: {exc.strerror or exc}.",
            "Another program may use that port; pass --port with another number.",
        ) from exc
    print(f"Hearth is running at {server.entry_url}  (Ctrl+C to stop)", flush=True)
    if server.entry_url != server.url:
        print("  That address is yours alone: it opens the page for this start only (`hearth open` opens it).")
    print(f"OpenAI-compatible API at {server.api_url}  (its key: hearth api-key)", flush=True)
    write_record(services.paths.server_file, ServerRecord(server.url, server.api_url, os.getpid(), server.entry_url))
    if open_browser and not open_in_browser(services.paths.root, server.entry_url):
        _err("No web browser could be started here; open the address above in one.")
    # `kill PID` (SIGTERM) shuts down as Ctrl+C does: the engine is stopped and the server record removed.
    signal.signal(signal.SIGTERM, exit_on_terminate)
    terminated: int | None = None
    try:
        server.block_thread()
    except SystemExit as stop:
        terminated = stop.code if isinstance(stop.code, int) else 1
        raise
    finally:
        remove_record(services.paths.server_file, os.getpid())
        remove_page_files(services.paths.page_files_dir)
        (services.paths.root / REDIRECT_FILE).unlink(missing_ok=True)  # its secret dies with this start
        services.close()
        if terminated is not None:
            # Everything of ours is closed. A native thread may still be inside a library (torch embedding a
            # request's texts); the interpreter's own shutdown would destroy its objects under it and abort
            # ("terminate called without an active exception", seen under load): end here instead.
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(terminated)
    return EXIT_OK


def _repair_damaged_stores(settings: Settings) -> None:
    """Repair, before anything opens them, the stores found damaged (the page told the person to restart)."""
    from app.services.upkeep.repair import repair_at_start

    for report in repair_at_start(settings, lambda line: _err(f"  {for_terminal(line)}")):
        _err(f"The {report.store} was damaged; repaired it ({for_terminal(str(report.path))}):")
        for line in report.done:
            _err(f"  - {for_terminal(line)}")
        for line in report.lost:
            _err(f"  ! not saved: {for_terminal(line)}")


def run_open(settings: Settings, print_address: bool) -> int:
    """Open the running Hearth's page for its owner (through an owner-only file), or print its address."""
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.serving.instance import read_record
    from app.ui.open_page import open_in_browser

    paths = ensure_data_dir(resolve_data_paths(settings.home))
    record = read_record(paths.server_file)
    if record is None:
        raise HearthError("Hearth is not running.", "Start it with `hearth ui --open`.")
    if print_address:
        print(record.entry_url, flush=True)
        return EXIT_OK
    if not open_in_browser(paths.root, record.entry_url):
        raise HearthError(
            "No web browser could be started here.", "Run `hearth open --print` and open that address in one."
        )
    _err(f"Opened {record.url} in your browser.")
    return EXIT_OK


def exit_on_terminate(signum: int, _frame: object) -> None:
    """SIGTERM ends the process as Ctrl+C does, once: a second one (the window closing asks twice, through its
    stop and through the parent-death signal) would interrupt the shutdown it started, leaving the server record
    and the engine behind."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def run_api_key(settings: Settings, rotate: bool) -> int:
    """Print the API key (made on first use); with ``rotate``, replace it first."""
    from app.api.keys import ApiKeyStore
    from app.paths import ensure_data_dir, resolve_data_paths

    keys = ApiKeyStore(ensure_data_dir(resolve_data_paths(settings.home)).api_key_file)
    if rotate:
        print(keys.rotate(), flush=True)
        _err("The old key no longer works, in a running Hearth too; give the new one to your clients.")
    else:
        print(keys.get(), flush=True)
    return EXIT_OK


def ensure_port_free(host: str, port: int) -> None:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe_socket:
        # Same option the web server sets, so a port left in TIME_WAIT by a previous run counts as free.
        probe_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe_socket.bind((host, port))
        except OSError as exc:
            raise HearthError(
                f"Cannot listen on {host}:{port}: {exc.strerror or exc}.",
                f"Another program (maybe another Hearth) is using port {port}; stop it or pass --port "
                f"{port + 1 if port < 65535 else 7860}.",
            ) from None


@dataclass(frozen=True)
class PrintedAnswer:
    """What :func:`print_answer` saw of one answer besides its text."""

    conversation_id: str | None
    sources: tuple[Source, ...]
    usage: Usage | None
    finished: str


def print_answer(events: Iterable[object]) -> PrintedAnswer:
    """Stream one answer of a conversation to stdout: attaching's progress and what a long prompt makes the model
    read on stderr until the first word, each attached file's use, then the text as it comes."""
    from app.services.answering.chat import TurnStarted
    from rag.attachments import AttachProgress

    progress = ProgressLine(sys.stderr.isatty())
    pace, read_words = ReadingPace(), "your question"
    conversation_id: str | None = None
    sources: tuple[Source, ...] = ()
    usage: Usage | None = None
    finished = "stop"
    for event in events:
        if isinstance(event, AttachProgress):
            progress.show(event.words)
        elif isinstance(event, TurnStarted):
            progress.clear()
            conversation_id, sources = event.conversation_id, event.sources
            for use in event.attachments:
                _err(f"[{use.words}]")
            read_words = event.read_words
            if event.reading:
                progress.show(event.reading)  # until the first word
        elif isinstance(event, Reading):  # the engine's own progress through a long prompt
            progress.show(pace.line(read_words, event.done, event.total))
        elif isinstance(event, TextDelta):
            progress.clear()
            sys.stdout.write(for_terminal_lines(event.text))
            sys.stdout.flush()
        elif isinstance(event, Usage):
            usage = event
        elif isinstance(event, Finished):
            finished = event.reason
    sys.stdout.write("\n")
    return PrintedAnswer(conversation_id, sources, usage, finished)


def run_chat(
    settings: Settings,
    question: str,
    attach: Sequence[Path] = (),
    adapter: str | None = None,
    adapter_scale: float = 1.0,
) -> int:
    services = build_services(settings)
    try:
        # how far the model has read a long prompt, on the terminal until the first word
        params = dataclasses.replace(services.generation_params(adapter, adapter_scale), report_reading=True)
        load_model(services)
        events = services.chat.send(
            None, question, TurnSettings(params, settings.generation.system_prompt), attach=attach
        )
        answer = print_answer(events)
        for source in answer.sources:
            _err(f"[{source.number}] {source.label}")
        if (usage := answer.usage) is not None:
            _err(
                f"[{usage.completion_tokens} tokens · {usage.time_to_first_token_ms / 1000:.2f} s to first token · "
                f"{usage.decode_tokens_per_s:.1f} tokens/s]"
            )
    finally:
        services.close()
    return EXIT_OK


def doctor_report(settings: Settings, inventory: HardwareInventory) -> dict[str, Any]:
    """Everything a bug report needs; failures are reported inside, never raised."""
    from app.paths import resolve_data_paths
    from models.gguf import read_model_info, sha256_of

    report: dict[str, Any] = {
        "hardware": asdict(inventory) | {"isa_flags": sorted(inventory.isa_flags)},
        "data_dir": str(resolve_data_paths(settings.home).root),
    }
    try:
        choice = model_choice(settings, inventory)
        model = read_model_info(choice.path)
        report["model"] = {
            "path": str(model.path),
            "name": model.display_name,
            "architecture": model.architecture,
            "quantization": model.quantization,
            "parameters": model.parameter_count,
            "file_size_bytes": model.file_size_bytes,
            "trained_context_length": model.trained_context_length,
            "has_chat_template": bool(model.chat_template),
            "sha256": sha256_of(model.path),
        }
    except HearthError as exc:
        report["error"] = {"message": exc.message, "remedy": exc.remedy, "type": type(exc).__name__}
        return report
    return report | plan_report(inventory, model, choice.prefs)


def plan_report(inventory: HardwareInventory, model: ModelInfo, prefs: Preferences) -> dict[str, Any]:
    """The plan part of the doctor's report: the plan Hearth would use for this model here, or why there is none."""
    from backends import registry
    from backends.selection import select_backend

    try:
        plan = select_backend(inventory, model, prefs, registry.AUTOMATIC, registry.ALL)
    except HearthError as exc:
        return {"error": {"message": exc.message, "remedy": exc.remedy, "type": type(exc).__name__}}
    return {"plan": plan.to_json() | {"memory_total_bytes": plan.memory.total_bytes}}


def memory_bar(placement: dict[str, Any], width: int = 30) -> str:
    """One device's share of the plan as a text bar: what the model takes of what is free there."""
    memory = placement["memory"]
    need = memory["weights_bytes"] + memory["kv_cache_bytes"] + memory["compute_bytes"]
    if not placement["available_bytes"]:  # a worker: its memory is not known here
        return f"{placement['device']}: {placement['layers']} layers (the worker's free memory is not measured yet)"
    free = max(placement["available_bytes"], 1)
    filled = min(width, round(width * need / free))
    layers = f"{placement['layers']} layers, " if placement["layers"] else ""
    return (
        f"{placement['device']:<8} [{'#' * filled}{'.' * (width - filled)}] {layers}{format_bytes(need)} of "
        f"{format_bytes(placement['available_bytes'])} available"
    )


def run_doctor(settings: Settings, as_json: bool) -> int:
    enforce_offline()
    inventory = probe()
    report = doctor_report(settings, inventory)
    if as_json:
        print(json.dumps(report, indent=2, default=str))
        return EXIT_OK
    print("Hardware")
    for line in describe(inventory):
        print(f"  {line}")
    for note in inventory.notes:
        print(f"  note: {note}")
    print(f"Data directory\n  {for_terminal(report['data_dir'])}")
    if model := report.get("model"):
        print("Model")
        print(
            f"  {for_terminal(model['name'])} — {for_terminal(model['architecture'])}, "
            f"{model['parameters'] / 1e6:.0f}M parameters"
        )
        print(f"  {for_terminal(model['path'])} ({format_bytes(model['file_size_bytes'])})")
        print(f"  trained context {model['trained_context_length']} tokens; sha256 {model['sha256']}")
    for line in plan_lines(report):
        print(line)
    return 1 if report.get("error") else EXIT_OK


def plan_lines(report: dict[str, Any]) -> list[str]:
    """The doctor's Plan section (or Problem, when there is no plan), as printed."""
    lines: list[str] = []
    if plan := report.get("plan"):
        lines += [
            "Plan",
            f"  backend: {plan['label']} on {', '.join(plan['devices'])}",
            f"  memory: about {format_bytes(plan['memory_total_bytes'])}",
        ]
        lines += [f"  {memory_bar(placement)}" for placement in plan["placements"]]
        lines += [f"  - {for_terminal(reason)}" for reason in plan["reasons"]]
    if error := report.get("error"):
        lines.append(f"Problem\n  {for_terminal(error['message'])}\n  what to do: {for_terminal(error['remedy'])}")
    return lines
