"""The engine's prefill settings against the time to read a documents prompt, in one run: the micro-batch llama.cpp
evaluates at once (`n_batch` = `n_ubatch`), flash attention on or off, and the threads, on a prompt the size of a
documents question's (three passages and the instructions: 464 tokens, the median of `hearth bench documents`).
For each setting: prefill tokens/s over the prompt and decode tokens/s over 32 tokens after it. Settings are
measured in turn, round after round, so the machine's drift lands on all of them. Run alone on a quiet machine:

    .venv/bin/python bench/prefill_settings.py --model PATH.gguf --json bench/data/prefill-settings.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPT_TOKENS = 464
DECODE_TOKENS = 32
BATCHES = (128, 256, 512)


def prompt_text() -> str:
    """Real technical prose to read, far more than 464 tokens of it: this project's README."""
    return (ROOT / "README.md").read_text(encoding="utf-8")


def measure(model: Path, batch: int, flash: bool, threads: int, tokens: list[int]) -> tuple[float, float]:
    """Prefill and decode tokens/s for one setting, on a freshly loaded model."""
    from app.bench.chat import open_raw_llama  # weights kept off llama.cpp's AMX path, as Hearth loads them

    llm = open_raw_llama(model, 4096, threads, n_batch=batch, n_ubatch=batch, flash_attn=flash)
    try:
        started = time.perf_counter()
        llm.eval(tokens)
        prefill = len(tokens) / (time.perf_counter() - started)
        started = time.perf_counter()
        for _ in range(DECODE_TOKENS):
            token = llm.sample(temp=0.0)
            llm.eval([token])
        decode = DECODE_TOKENS / (time.perf_counter() - started)
    finally:
        llm.close()
    return prefill, decode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2", help="thread counts to try (default 1,2)")
    parser.add_argument("--batches", default="128,256,512", help="micro-batch sizes to try (default 128,256,512)")
    parser.add_argument(
        "--prompt-tokens", type=int, default=PROMPT_TOKENS, help=f"prompt length (default {PROMPT_TOKENS})"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from backends.llamacpp.buffers import open_llama

    probe = open_llama(model_path=str(args.model), n_ctx=512, verbose=False)
    tokens = probe.tokenize(prompt_text().encode("utf-8"))[: args.prompt_tokens]
    probe.close()
    if len(tokens) < args.prompt_tokens:
        sys.exit(f"the README gave {len(tokens)} tokens, fewer than {args.prompt_tokens}")
    batches = [int(b) for b in args.batches.split(",")]
    settings = list(itertools.product(batches, (False, True), [int(t) for t in args.threads.split(",")]))
    figures: dict[tuple[int, bool, int], list[tuple[float, float]]] = {s: [] for s in settings}
    for round_ in range(args.rounds):
        for setting in settings if round_ % 2 == 0 else list(reversed(settings)):
            figures[setting].append(measure(args.model, *setting, tokens))
            print(f"round {round_ + 1}: {setting} -> {figures[setting][-1]}", file=sys.stderr, flush=True)
    rows: list[dict[str, Any]] = []
    print("| n_batch = n_ubatch | flash attention | threads | prefill tok/s | decode tok/s |")
    print("| --- | --- | --- | --- | --- |")
    for (batch, flash, threads), runs in figures.items():
        prefill = [p for p, _ in runs]
        decode = [d for _, d in runs]
        row = {
            "batch": batch,
            "flash_attention": flash,
            "threads": threads,
            "prefill": {"median": statistics.median(prefill), "low": min(prefill), "high": max(prefill)},
            "decode": {"median": statistics.median(decode), "low": min(decode), "high": max(decode)},
        }
        rows.append(row)
        print(
            f"| {batch} | {'on' if flash else 'off'} | {threads} | {row['prefill']['median']:.1f} "
            f"({min(prefill):.1f}-{max(prefill):.1f}) | {row['decode']['median']:.1f} "
            f"({min(decode):.1f}-{max(decode):.1f}) |"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"model": args.model.name, "prompt_tokens": args.prompt_tokens, "rows": rows}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
