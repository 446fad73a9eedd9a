"""A follow-up after Hearth restarted, with the conversation's cache saved on disk, against reading the conversation
again, with raw llama-cpp-python reading the same prompt in the same run.

The conversation: a long first turn (a text of the held-out Apache License 2.0 and a question about it), its greedy
answer, then a short follow-up. For each run, in an order that alternates between runs:

- read again: a freshly loaded engine with no saved caches answers the follow-up (it reads the whole conversation);
- resumed: an engine answers the first turn and stops (saving its slot), a new engine loads and answers the
  follow-up (it loads the saved cache and reads only the follow-up);
- kept in memory: one engine answers both turns (the slot still holds the first);
- raw: llama-cpp-python's ``Llama`` reads the follow-up's whole prompt (the same tokens) and writes one token.

Times to the first token exclude loading the model. The saved file is read from the page cache (just written), as
after a restart that did not reboot the machine.

    .venv/bin/python bench/conversation_resume.py --model PATH.gguf --runs 5 \
        --json bench/data/conversation-resume.NAME.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXT = ROOT / "models" / "data" / "heldout-apache-2.0.txt"
SYSTEM = "You are a helpful assistant. Answer from the text the user gives, in one or two sentences."
QUESTION = "What does this text say about the use of the Licensor's trademarks?"
FOLLOW_UP = "And what does it say about warranty?"


def _messages(chars: int, first_answer: str | None) -> list[Any]:
    from backends.base import ChatMessage

    text = TEXT.read_text(encoding="utf-8")[:chars]
    first = [ChatMessage("system", SYSTEM), ChatMessage("user", f"The text:\n\n{text}\n\nQuestion: {QUESTION}")]
    if first_answer is None:
        return first
    return [*first, ChatMessage("assistant", first_answer), ChatMessage("user", FOLLOW_UP)]


def _engine(model: Any, context: int, threads: int, saved: Path | None) -> Any:
    from backends.base import LoadOptions, SavedCaches
    from backends.llamacpp.backend import LlamaCppBackend

    backend = LlamaCppBackend()
    options = LoadOptions(
        context_length=context,
        threads=threads,
        seed=7,
        saved_caches=SavedCaches(str(saved), 4 << 30) if saved is not None else None,
    )
    list(backend.load(model, options))
    return backend


def _answer(backend: Any, messages: list[Any], tokens: int) -> tuple[str, Any]:
    from backends.base import CancelToken, GenerationParams, TextDelta, Usage

    params = GenerationParams(temperature=0.0, max_new_tokens=tokens, repeat_penalty=1.0)
    events = list(backend.stream_chat(messages, params, CancelToken()))
    usage = next(e for e in events if isinstance(e, Usage))
    return "".join(e.text for e in events if isinstance(e, TextDelta)), usage


def _raw_first_token_ms(path: Path, prompt: list[int], context: int, threads: int) -> float:
    from app.bench.chat import open_raw_llama

    llm = open_raw_llama(path, context, threads, n_batch=512)
    try:
        began = time.perf_counter()
        llm.create_completion(prompt, max_tokens=1, temperature=0.0)
        return (time.perf_counter() - began) * 1000
    finally:
        llm.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the embedded SmolLM2-135M)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chars", type=int, default=6000, help="characters of the text in the first turn")
    parser.add_argument("--answer-tokens", type=int, default=48)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from backends.llamacpp.log_route import route_llama_logs
    from models.embedded import embedded_chat_model
    from models.gguf import read_model_info

    route_llama_logs()
    path = args.model or embedded_chat_model()
    model = read_model_info(path)
    probe = _engine(model, args.context, args.threads, None)
    try:
        first_answer, _ = _answer(probe, _messages(args.chars, None), args.answer_tokens)
        follow = _messages(args.chars, first_answer)
        prompt = probe._tokenize_chat(follow)
    finally:
        probe.close()

    def read_again() -> dict[str, Any]:
        backend = _engine(model, args.context, args.threads, None)
        try:
            text, usage = _answer(backend, follow, args.answer_tokens)
        finally:
            backend.close()
        return {"ms": usage.time_to_first_token_ms, "cached": usage.cached_tokens, "text": text}

    def resumed() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as folder:
            before = _engine(model, args.context, args.threads, Path(folder))
            try:
                _answer(before, _messages(args.chars, None), args.answer_tokens)
            finally:
                before.close()
            saved = sum(f.stat().st_size for f in Path(folder).glob("*/*.kv"))
            after = _engine(model, args.context, args.threads, Path(folder))
            try:
                text, usage = _answer(after, follow, args.answer_tokens)
            finally:
                after.close()
        return {"ms": usage.time_to_first_token_ms, "cached": usage.cached_tokens, "text": text, "file_bytes": saved}

    def in_memory() -> dict[str, Any]:
        backend = _engine(model, args.context, args.threads, None)
        try:
            _answer(backend, _messages(args.chars, None), args.answer_tokens)
            text, usage = _answer(backend, follow, args.answer_tokens)
        finally:
            backend.close()
        return {"ms": usage.time_to_first_token_ms, "cached": usage.cached_tokens, "text": text}

    def raw() -> dict[str, Any]:
        return {"ms": _raw_first_token_ms(path, prompt, args.context, args.threads)}

    ways = {"read again": read_again, "resumed": resumed, "kept in memory": in_memory, "raw llama-cpp-python": raw}
    runs: list[dict[str, dict[str, Any]]] = []
    for run in range(args.runs):
        order = list(ways) if run % 2 == 0 else list(reversed(ways))
        runs.append({name: ways[name]() for name in order})
        print(f"run {run + 1}: " + ", ".join(f"{n} {runs[-1][n]['ms']:.0f} ms" for n in ways), flush=True)

    def spread(values: list[float]) -> dict[str, float]:
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    summary = {name: spread([r[name]["ms"] for r in runs]) for name in ways}
    ratios = {
        "resumed / read again": spread([r["resumed"]["ms"] / r["read again"]["ms"] for r in runs]),
        "kept in memory / read again": spread([r["kept in memory"]["ms"] / r["read again"]["ms"] for r in runs]),
        "read again / raw": spread([r["read again"]["ms"] / r["raw llama-cpp-python"]["ms"] for r in runs]),
        "resumed / raw": spread([r["resumed"]["ms"] / r["raw llama-cpp-python"]["ms"] for r in runs]),
    }
    same_text = sum(r["resumed"]["text"] == r["kept in memory"]["text"] for r in runs)
    result = {
        "command": "bench/conversation_resume.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "model": path.name,
        "prompt_tokens": len(prompt),
        "cached_tokens": {name: runs[0][name].get("cached") for name in ways if name != "raw llama-cpp-python"},
        "saved_file_bytes": runs[0]["resumed"]["file_bytes"],
        "first_token_ms": summary,
        "ratios": ratios,
        "resumed_text_same_as_kept_in_memory": f"{same_text} of {len(runs)}",
        "runs": runs,
    }
    print(f"{path.name}: follow-up prompt {len(prompt)} tokens; saved file {result['saved_file_bytes']:,} bytes")
    print("| follow-up | first token, ms (median, min-max) | cached prompt tokens |")
    print("| --- | --- | --- |")
    for name in ways:
        s = summary[name]
        cached = result["cached_tokens"].get(name, "")
        print(f"| {name} | {s['median']:.0f} ({s['min']:.0f}-{s['max']:.0f}) | {cached} |")
    for name, r in ratios.items():
        print(f"{name}: {r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})")
    print(f"resumed answer the same as kept in memory: {same_text} of {len(runs)}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
