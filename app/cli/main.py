"""``hearth``: the command line. Typed errors become one readable message and exit code 1 here."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from app.library_log import keep_library_logs_off_the_terminal
from app.paths import keep_new_files_private
from app.terminal_text import TerminalLogFormatter, for_terminal
from models.shared.errors import HearthError, InvalidChoice

if TYPE_CHECKING:
    from app.settings import Settings

EXIT_OK = 0
EXIT_ERROR = 1


def settings_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, dict[str, Any]] = {"model": {}, "backend": {}, "generation": {}, "server": {}}
    mapping = {
        "model": ("model", "path"),
        "context": ("model", "context_length"),
        "backend": ("backend", "name"),
        "threads": ("backend", "threads"),
        "device": ("backend", "device"),
        "gpu_layers": ("backend", "gpu_layers"),
        "slots": ("backend", "slots"),
        "kv_cache": ("backend", "kv_cache_type"),
        "prompt_lookup": ("backend", "prompt_lookup"),
        "worker": ("backend", "workers"),
        "system": ("generation", "system_prompt"),
        "temperature": ("generation", "temperature"),
        "max_tokens": ("generation", "max_new_tokens"),
        "seed": ("generation", "seed"),
        "host": ("server", "host"),
        "port": ("server", "port"),
    }
    for flag, (section, key) in mapping.items():
        value = getattr(args, flag, None)
        if value is not None:
            overrides[section][key] = value
    return {section: values for section, values in overrides.items() if values}


_FORWARDED_TO_UI = (
    "model",
    "context",
    "backend",
    "worker",
    "device",
    "gpu_layers",
    "threads",
    "slots",
    "kv_cache",
    "prompt_lookup",
    "port",
)


def ui_arguments(args: argparse.Namespace) -> list[str]:
    """The ``hearth ui`` flags that start the server the way ``args`` asked (the window passes them on)."""
    forwarded: list[str] = []
    for name in _FORWARDED_TO_UI:
        value = getattr(args, name, None)
        for one in value if isinstance(value, list) else [value]:
            if one is not None:
                forwarded += [f"--{name.replace('_', '-')}", str(one)]
    return forwarded


def parse_command_line(parser: argparse.ArgumentParser, given: list[str]) -> argparse.Namespace:
    """``given`` parsed; for ``mcp add``, everything after ``--`` is the server's command, wherever the options
    stand (argparse alone takes the command's place as filled, empty, as soon as it reads NAME, so
    ``mcp add NAME --env K=V -- CMD`` would be refused)."""
    if "--" in given:
        cut = given.index("--")
        head = given[:cut]
        if any(head[i : i + 2] == ["mcp", "add"] for i in range(len(head))):
            args = parser.parse_args(head)
            args.server_command = given[cut + 1 :]
            return args
    return parser.parse_args(given)


def main(argv: Sequence[str] | None = None) -> int:
    from app.cli.parser import build_parser

    keep_new_files_private()  # conversations, document copies, keys and indexes are the user's alone
    args = parse_command_line(build_parser(), sys.argv[1:] if argv is None else list(argv))
    log_lines = logging.StreamHandler()
    log_lines.setFormatter(TerminalLogFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[log_lines])
    if not args.verbose:
        # Damaged files are reported per file by Hearth itself; the parsers' own warnings only add noise.
        for noisy in ("pypdf", "httpx"):
            logging.getLogger(noisy).setLevel(logging.ERROR)
        keep_library_logs_off_the_terminal()  # llama.cpp's lines go to the data folder's logs/llama.cpp.log
    try:
        return _dispatch(args)
    except HearthError as exc:
        # Messages quote file names and paths, which may hold terminal escapes.
        print(f"error: {for_terminal(exc.message)}\n  what to do: {for_terminal(exc.remedy)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    from app.settings import load_settings

    if args.command == "bench":
        return _bench(args)
    settings = load_settings(**settings_overrides(args))
    for handles, run in _GROUPS:
        if args.command in handles:
            return run(args, settings)
    raise AssertionError(f"unhandled command {args.command}")


def _bench(args: argparse.Namespace) -> int:
    from app.settings import load_settings

    if args.bench_kind == "parallel":
        from app.bench.parallel import run_parallel_bench

        return run_parallel_bench(args)
    if args.bench_kind == "roofline":
        from app.bench.roofline import run_roofline_bench

        return run_roofline_bench(args)
    if args.bench_kind == "pipeline":
        from app.bench.pipeline import run_pipeline_bench

        return run_pipeline_bench(args)
    if args.bench_kind == "contention":
        from app.bench.contention import run_contention_bench

        return run_contention_bench(load_settings(**settings_overrides(args)), args)
    if args.bench_kind == "lookup":
        from app.bench.lookup import run_lookup_bench

        return run_lookup_bench(load_settings(**settings_overrides(args)), args)
    if args.bench_kind == "documents":
        from app.bench.documents import run_documents_bench

        return run_documents_bench(load_settings(**settings_overrides(args)), args)
    from app.bench import chat as bench

    return bench.run_chat_bench(args)


def _serving(args: argparse.Namespace, settings: Settings) -> int:
    from app.cli import commands

    if args.command == "ui":
        from app.desktop.server import follow_parent

        follow_parent()  # started by a desktop window: end with it
        return commands.run_ui(settings, open_browser=args.open)
    if args.command == "worker":
        from app.cli.worker import run_worker
        from app.paths import ensure_data_dir, resolve_data_paths

        return run_worker(
            args.host, args.port, args.threads, ensure_data_dir(resolve_data_paths(settings.home)).root, args.device
        )
    if args.command == "desktop":
        from app.cli.desktop import run_desktop

        return run_desktop(settings, ui_arguments(args), args.events, args.keep_running, args.verbose)
    return commands.run_open(settings, args.print_address)


def _tools_and_workers(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "mcp":
        from app.cli.mcp import run_mcp

        return run_mcp(
            settings,
            args.mcp_action,
            name=getattr(args, "name", None),
            command=getattr(args, "server_command", None),
            url=getattr(args, "url", None),
            token_file=getattr(args, "token_file", None),
            env=getattr(args, "env", None),
            file=getattr(args, "file", None),
        )
    from app.cli.workers import run_workers

    return run_workers(
        settings,
        args.workers_action,
        getattr(args, "address", None),
        getattr(args, "code", None),
        measure=getattr(args, "measure", False),
    )


def _chat(args: argparse.Namespace, settings: Settings) -> int:
    from app.cli import commands

    if args.question is None:
        if args.tools or args.allow_tools or args.attach or args.adapter or args.tools_collection:
            raise InvalidChoice(
                "A conversation in the terminal takes no --tools, --attach, --adapter or --collection yet.",
                'Give a question to use them: hearth chat "question" --tools',
            )
        from app.cli.session import run_chat_session

        return run_chat_session(settings)
    if args.tools or args.allow_tools:
        from app.cli.tools import run_chat_with_tools

        if args.attach or args.adapter:
            raise InvalidChoice("--tools does not go with --attach or --adapter yet.", "Leave one of them out.")
        return run_chat_with_tools(
            settings, args.question, allow_all=args.allow_tools, collection=args.tools_collection
        )
    if args.tools_collection:
        raise InvalidChoice(
            "--collection goes with --tools here (the model searches it when it needs to).",
            'Add --tools, or ask from the collection with hearth ask "question" -c NAME.',
        )
    return commands.run_chat(settings, args.question, args.attach, args.adapter, args.adapter_scale)


def _running(args: argparse.Namespace, settings: Settings) -> int:
    from app.cli import commands

    if args.command == "doctor":
        return commands.run_doctor(settings, as_json=args.json)
    if args.command == "use":
        from app.cli.use import run_cancel_load, run_use

        if args.cancel_load:
            return run_cancel_load(settings)
        return run_use(settings, args.model, args.backend, args.device, args.context, args.cancel_running)
    if args.command == "api-key":
        return commands.run_api_key(settings, rotate=args.rotate)
    from app.cli.repair import run_repair

    return run_repair(settings, check_only=args.check)


def _tuning(args: argparse.Namespace, settings: Settings) -> int:
    from app.cli import tune as commands_tune

    if args.command == "adapters":
        return commands_tune.run_adapters(
            settings, args.adapters_action, args.name, args.scale, args.conversation, args.collection
        )
    options = commands_tune.tune_options(
        args.preset,
        max_steps=args.steps,
        epochs=args.epochs,
        rank=args.rank,
        alpha=args.alpha or (2 * args.rank if args.rank else None),
        learning_rate=args.learning_rate,
        max_length=args.max_length,
        batch_size=args.batch_size,
        targets=tuple(t.strip() for t in args.targets.split(",") if t.strip()) if args.targets else None,
        gradient_checkpointing=args.gradient_checkpointing or None,
        save_every=args.save_every,
        device=args.device,
        gpu_memory_mib=args.gpu_memory,
    )
    return commands_tune.run_tune(settings, args.data, args.name, options, args.resume)


def _evaluation(args: argparse.Namespace, settings: Settings) -> int:
    if args.eval_kind == "tools":
        from app.cli.eval_tools import run_eval_tools

        return run_eval_tools(
            settings,
            args.questions,
            args.eval_model,
            args.form,
            args.limit,
            args.part,
            args.output,
            fitting=args.fitting,
        )
    if args.eval_kind == "answers":
        from app.cli.eval import run_eval_answers

        path, collection, model = args.questions, args.collection, args.eval_model
        return run_eval_answers(
            settings,
            path,
            collection,
            model,
            args.limit,
            args.output,
            args.eval_max_tokens,
            args.part,
            keep_passages=args.keep_passages,
            recompute=args.recompute,
            read_first=args.read_first,
        )
    from app.cli import documents as commands_documents

    return commands_documents.run_eval_retrieval(settings, args.questions, args.collection, args.top_k, args.part)


def _documents(args: argparse.Namespace, settings: Settings) -> int:
    from app.cli import documents as commands_documents

    if args.command == "ask" and (args.tools or args.allow_tools):
        from app.cli.tools import run_chat_with_tools

        if args.adapter:
            raise InvalidChoice("--tools does not go with --adapter yet.", "Leave one of them out.")
        return run_chat_with_tools(settings, args.question, allow_all=args.allow_tools, collection=args.collection)
    if args.command == "ask":
        top_k = args.top_k or settings.rag.top_k
        return commands_documents.run_ask(
            settings, args.question, args.collection, top_k, args.adapter, args.adapter_scale
        )
    if args.command == "ingest":
        return commands_documents.run_ingest(settings, args.paths, args.collection, args.read_ahead)
    if (args.delete or args.remove_file) and not args.name:
        raise HearthError("Which collection?", "Name it: hearth collections NAME --delete")
    copy_to = "server" if args.copy_to_server else "folder" if args.copy_to_folder else None
    return commands_documents.run_collections(settings, args.name, args.delete, args.remove_file, copy_to)


def _models(args: argparse.Namespace, settings: Settings) -> int:
    from app.cli import models as commands_models

    action = args.models_action
    if action == "list":
        return commands_models.run_list(settings, args.json)
    if action == "import":
        return commands_models.run_import(settings, args.path, args.copy)
    if action == "remove":
        return commands_models.run_remove(settings, args.model)
    if action == "default":
        return commands_models.run_default(settings, args.model)
    if action == "quantize":
        return commands_models.run_quantize(settings, args.model, args.type, args.allow_requantize)
    if action == "available":
        return commands_models.run_available(settings)
    if action == "install":
        return commands_models.run_install(settings, args.name, args.skip_if_offline)
    if action == "search":
        return commands_models.run_search(args.text, args.limit)
    if action == "ladder":
        types = [t.strip() for t in args.types.split(",") if t.strip()]
        return commands_models.run_ladder(
            settings, args.model, types, args.json, args.chart, args.runs, args.remove_copies
        )
    return commands_models.run_convert(settings, args.model, args.type)


# Which commands each function above runs, in the order they are tried.
_GROUPS: tuple[tuple[frozenset[str], Callable[[argparse.Namespace, Settings], int]], ...] = (
    (frozenset({"ui", "worker", "desktop", "open"}), _serving),
    (frozenset({"mcp", "workers"}), _tools_and_workers),
    (frozenset({"chat"}), _chat),
    (frozenset({"doctor", "use", "api-key", "repair"}), _running),
    (frozenset({"tune", "adapters"}), _tuning),
    (frozenset({"eval"}), _evaluation),
    (frozenset({"ingest", "collections", "ask"}), _documents),
    (frozenset({"models"}), _models),
)
