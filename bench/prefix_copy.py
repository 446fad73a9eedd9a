"""The shared prefix read once: a new conversation's first question from documents, while another
conversation's slot holds the same system prompt, with the scheduler copying that slot's cache of it and with the
copy turned off (the prompt read whole, as before), against raw llama-cpp-python reading the same prompt in the
same run.

Each measurement starts a fresh engine with four slots: conversation A asks about three sections of a held-out
text (the Apache License 2.0) and gets a short answer; then conversation B, new, asks about three other sections.
B takes a slot of its own (A's holds too little of B's prompt to be chosen for it), so without the copy it reads
the system prompt again. Rounds alternate the two ways; the greedy answers must stay the same.

    .venv/bin/python bench/prefix_copy.py --model PATH.gguf --runs 3 --json bench/data/prefix-copy.NAME.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXT = ROOT / "models" / "data" / "heldout-apache-2.0.txt"
FIRST = (
    "What does the license say about trademarks?",
    ("6. Trademarks.", "7. Disclaimer of Warranty.", "9. Accepting"),
)
SECOND = (
    "When does the patent license granted to a contributor end?",
    ("3. Grant of Patent License.", "4. Redistribution.", "5. Submission of Contributions."),
)


def messages(question: str, markers: tuple[str, ...]) -> list[Any]:
    from backends.base import ChatMessage
    from rag.prompt import Source, rag_question, rag_system_prompt

    text = TEXT.read_text(encoding="utf-8")
    sources = []
    for number, marker in enumerate(markers, start=1):
        start = text.index(marker)
        sources.append(Source(number, "apache-2.0.txt", None, None, " ".join(text[start : start + 900].split())))
    return [ChatMessage("system", rag_system_prompt("")), ChatMessage("user", rag_question(question, sources))]


def hearth_second(info: Any, copy: bool, args: argparse.Namespace) -> dict[str, Any]:
    """Conversation A, then B in a fresh engine; B's time to first token, cached tokens and answer."""
    from backends.base import CancelToken, GenerationParams, LoadOptions, TextDelta, Usage
    from backends.llamacpp import batch
    from backends.llamacpp.backend import LlamaCppBackend

    original = batch.BatchScheduler._copy_prefix
    if not copy:
        batch.BatchScheduler._copy_prefix = lambda self, slot, prompt, reused: reused  # type: ignore[method-assign]
    backend = LlamaCppBackend()
    try:
        list(backend.load(info, LoadOptions(args.context, threads=args.threads, slots=4)))
        params = GenerationParams(temperature=0.0, max_new_tokens=args.answer_tokens, repeat_penalty=1.0)
        for _ in backend.stream_chat(messages(*FIRST), replace(params, cache_owner="A"), CancelToken()):
            pass
        text, usage = "", None
        for event in backend.stream_chat(messages(*SECOND), replace(params, cache_owner="B"), CancelToken()):
            if isinstance(event, TextDelta):
                text += event.text
            elif isinstance(event, Usage):
                usage = event
        assert usage is not None
        return {
            "ttft_ms": usage.time_to_first_token_ms,
            "cached": usage.cached_tokens,
            "prompt": usage.prompt_tokens,
            "text": text,
        }
    finally:
        backend.close()
        batch.BatchScheduler._copy_prefix = original  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the embedded model)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--answer-tokens", type=int, default=16)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from app.bench.chat import open_raw_llama
    from app.bench.stats import report, summarise
    from backends.llamacpp.log_route import route_llama_logs
    from models.embedded import embedded_chat_model
    from models.gguf import read_model_info

    route_llama_logs()
    path = args.model or embedded_chat_model()
    info = read_model_info(path)
    raw = open_raw_llama(path, args.context, args.threads)
    second = [{"role": m.role, "content": m.content} for m in messages(*SECOND)]
    rows = []
    try:
        for run in range(args.runs):
            row: dict[str, Any] = {"run": run}
            for way in ("copy", "read", "raw") if run % 2 == 0 else ("raw", "read", "copy"):
                if way == "raw":
                    raw.reset()
                    began = time.perf_counter()
                    for _chunk in raw.create_chat_completion(messages=second, max_tokens=1, temperature=0.0):
                        pass
                    row["raw_ttft_ms"] = (time.perf_counter() - began) * 1000
                else:
                    result = hearth_second(info, way == "copy", args)
                    row |= {f"{way}_{key}": value for key, value in result.items()}
            row["same_answer"] = row["copy_text"] == row["read_text"]
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("text")}), flush=True)
            rows.append(row)
    finally:
        raw.close()

    result = {
        "command": "bench/prefix_copy.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "model": path.name,
        "prompt_tokens": rows[0]["copy_prompt"],
        "copied_tokens": sorted({r["copy_cached"] for r in rows}),
        "read_cached_tokens": sorted({r["read_cached"] for r in rows}),
        "ttft_ms": {way: summarise([r[f"{way}_ttft_ms"] for r in rows]) for way in ("copy", "read", "raw")},
        "ratios": {
            "copy / read": summarise([r["copy_ttft_ms"] / r["read_ttft_ms"] for r in rows]),
            "copy / raw": summarise([r["copy_ttft_ms"] / r["raw_ttft_ms"] for r in rows]),
            "read / raw": summarise([r["read_ttft_ms"] / r["raw_ttft_ms"] for r in rows]),
        },
        "same_answer": f"{sum(r['same_answer'] for r in rows)} of {len(rows)}",
        "rows": rows,
    }
    report(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
