"""What sharing one KV cache between the slots costs: llama.cpp's unified cache, which lets slots share
and hand over cells (passages joined, a system prompt read once), against a stream of cells per slot, on the same
model in the same run.

The case that could cost: three slots each hold a long conversation while the fourth reads a documents-sized prompt
and writes an answer alone, then all four write together. In one stream every query passes over the other slots'
cells (masked, and skipped before the dot product by the CPU flash-attention kernel); with a stream per slot it
sees only its own. Rounds alternate the two layouts.

    .venv/bin/python bench/unified_cache.py --model PATH.gguf --runs 3 --json bench/data/unified-cache.NAME.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXT = ROOT / "models" / "data" / "heldout-apache-2.0.txt"
SLOTS = 4


def open_model(path: Path, unified: bool, context: int) -> Any:
    from backends.base import LoadOptions
    from backends.llamacpp import native

    original = native._context_params

    def streams(options: Any, slots: int) -> Any:
        params = original(options, slots)
        params.kv_unified = False
        params.n_seq_max = slots
        return params

    native._context_params = original if unified else streams  # type: ignore[assignment]
    try:
        return native.NativeModel(path, LoadOptions(context_length=context, threads=2, slots=SLOTS))
    finally:
        native._context_params = original  # type: ignore[assignment]


def read(model: Any, batch: Any, tokens: list[int], start: int, sequence: int) -> None:
    for offset in range(0, len(tokens), batch.capacity):
        piece = tokens[offset : offset + batch.capacity]
        batch.clear()
        for index, token in enumerate(piece):
            batch.add(token, start + offset + index, sequence, offset + index == len(tokens) - 1)
        assert model.decode(batch) == 0


def steps(model: Any, batch: Any, sequences: dict[int, int], count: int, token: int) -> float:
    """``count`` decode steps of one token for each sequence (at its next position); seconds per step."""
    began = time.perf_counter()
    for _ in range(count):
        batch.clear()
        for sequence, position in sequences.items():
            batch.add(token, position, sequence, True)
            sequences[sequence] = position + 1
        assert model.decode(batch) == 0
    return (time.perf_counter() - began) / count


def measure(path: Path, unified: bool, args: argparse.Namespace) -> dict[str, float]:
    from backends.llamacpp.native import BATCH_TOKENS, TokenBatch

    model = open_model(path, unified, args.context)
    batch = TokenBatch(BATCH_TOKENS)
    try:
        words = TEXT.read_text(encoding="utf-8").split()
        text = " ".join(words * 4)
        tokens = model.tokenize(text, True, False)
        held = tokens[: args.held]
        for sequence in range(SLOTS - 1):
            read(model, batch, held[sequence:] + held[:sequence], 0, sequence)
        prompt = tokens[args.held : args.held + args.prompt]
        began = time.perf_counter()
        read(model, batch, prompt, 0, SLOTS - 1)
        prompt_s = time.perf_counter() - began
        alone = steps(model, batch, {SLOTS - 1: len(prompt)}, args.tokens, tokens[5])
        together = steps(
            model,
            batch,
            {s: args.held for s in range(SLOTS - 1)} | {SLOTS - 1: len(prompt) + args.tokens},
            args.tokens,
            tokens[5],
        )
        return {
            "prompt_tokens_per_s": len(prompt) / prompt_s,
            "alone_ms_per_token": alone * 1000,
            "four_ms_per_step": together * 1000,
        }
    finally:
        batch.close()
        model.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the embedded model)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--context", type=int, default=4096, help="tokens per slot")
    parser.add_argument("--held", type=int, default=2000, help="tokens each of the other three slots holds")
    parser.add_argument("--prompt", type=int, default=600, help="the fourth slot's prompt tokens")
    parser.add_argument("--tokens", type=int, default=32, help="answer tokens (decode steps) measured")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from app.bench.stats import report, summarise
    from backends.llamacpp.log_route import route_llama_logs
    from models.embedded import embedded_chat_model

    route_llama_logs()
    path = args.model or embedded_chat_model()
    rows = []
    for run in range(args.runs):
        for unified in (True, False) if run % 2 == 0 else (False, True):
            row = {"run": run, "layout": "unified" if unified else "streams"} | measure(path, unified, args)
            print(json.dumps(row), flush=True)
            rows.append(row)

    keys = ("prompt_tokens_per_s", "alone_ms_per_token", "four_ms_per_step")
    by_run = {(r["run"], r["layout"]): r for r in rows}
    result = {
        "command": "bench/unified_cache.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "model": path.name,
        "slots": SLOTS,
        "held_tokens_per_other_slot": args.held,
        "prompt_tokens": args.prompt,
        "unified": {k: summarise([r[k] for r in rows if r["layout"] == "unified"]) for k in keys},
        "streams": {k: summarise([r[k] for r in rows if r["layout"] == "streams"]) for k in keys},
        "unified / streams": {
            k: summarise([by_run[(n, "unified")][k] / by_run[(n, "streams")][k] for n in range(args.runs)])
            for k in keys
        },
        "rows": rows,
    }
    report(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
