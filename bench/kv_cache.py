"""The context cache's precision (`--kv-cache f16|q8_0|q4_0`) against memory, prefill, decode and quality, in one
run: for each type, llama.cpp's own KV buffer size, prefill tokens/s over a documents-sized prompt, decode tokens/s,
perplexity over the held-out text Hearth's model ladder uses (the Apache License 2.0), and whether the greedy answer
to a fixed question is the f16 one. Each type loads the model fresh, with flash attention where the cache is
quantized (llama.cpp needs it for a quantized V cache), as Hearth's engine does. Types are measured in turn, round
after round, so the machine's drift lands on all of them.

    .venv/bin/python bench/kv_cache.py --model PATH.gguf --json bench/data/kv-cache.json
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2}  # ggml type numbers
KV_BUFFER = re.compile(r"KV buffer size =\s+([\d.]+) MiB")
QUESTION = "In bash, which builtin runs a command in the current shell without looking up functions? Answer briefly."


def _open(path: Path, kind: str, context: int, threads: int, logits_all: bool = False) -> Any:
    from app.bench.chat import open_raw_llama

    settings = {"type_k": TYPES[kind], "type_v": TYPES[kind], "flash_attn": kind != "f16", "logits_all": logits_all}
    return open_raw_llama(path, context, threads, n_batch=512, **settings)


def measure(path: Path, kind: str, context: int, threads: int, prompt_tokens: int, decode: int) -> dict[str, Any]:

    from models.ladder import PROMPT, perplexity_from, scored_windows

    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("llama.cpp")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        llm = _open(path, kind, context, threads)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.WARNING)
    kv_mib = sum(float(m.group(1)) for line in lines if (m := KV_BUFFER.search(line)))
    prompt = llm.tokenize((PROMPT + " ").encode() * 64, add_bos=True)[:prompt_tokens]
    llm.reset()
    started = time.perf_counter()
    llm.eval(prompt)
    prefill = len(prompt) / (time.perf_counter() - started)
    produced, started = 0, time.perf_counter()
    for _ in llm.generate(prompt, temp=0.0):
        produced += 1
        if produced >= decode:
            break
    decode_rate = produced / (time.perf_counter() - started)
    llm.reset()
    answer = llm.create_chat_completion(
        messages=[{"role": "user", "content": QUESTION}], max_tokens=48, temperature=0.0, repeat_penalty=1.0
    )["choices"][0]["message"]["content"]
    llm.close()

    text = (ROOT / "models" / "data" / "heldout-apache-2.0.txt").read_text()
    scorer = _open(path, kind, 512, threads, logits_all=True)
    tokens = scorer.tokenize(text.encode(), add_bos=False)
    nll, count = scored_windows(scorer, scorer.token_bos(), tokens, 512, windows=4)
    scorer.close()
    return {
        "kv_mib": kv_mib,
        "prefill": prefill,
        "decode": decode_rate,
        "perplexity": perplexity_from(nll, count),
        "answer": answer,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded model)")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=900, help="a documents question's prompt is ~941")
    parser.add_argument("--decode", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from backends.llamacpp.log_route import route_llama_logs
    from models.embedded import embedded_chat_model

    route_llama_logs()
    path = args.model or embedded_chat_model()
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in TYPES}
    for run in range(args.runs):
        for kind in TYPES:
            print(f"round {run + 1} of {args.runs}: {kind}", file=sys.stderr, flush=True)
            runs[kind].append(measure(path, kind, args.context, args.threads, args.prompt_tokens, args.decode))
    rows = []
    reference = runs["f16"][0]["answer"]
    for kind, measured in runs.items():
        prefills = [m["prefill"] for m in measured]
        decodes = [m["decode"] for m in measured]
        rows.append(
            {
                "type": kind,
                "kv_mib": measured[0]["kv_mib"],
                "prefill_median": statistics.median(prefills),
                "prefill_range": [min(prefills), max(prefills)],
                "decode_median": statistics.median(decodes),
                "decode_range": [min(decodes), max(decodes)],
                "perplexity": measured[0]["perplexity"],
                "same_answer_as_f16": all(m["answer"] == reference for m in measured),
                "answer": measured[0]["answer"],
            }
        )
    print(f"model {path.name}, context {args.context}, {args.threads} threads, {args.runs} rounds")
    print(f"{'type':<6}{'KV MiB':>8}{'prefill tok/s':>22}{'decode tok/s':>22}{'perplexity':>12}  same answer")
    for row in rows:
        low, high = row["prefill_range"]
        dlow, dhigh = row["decode_range"]
        print(
            f"{row['type']:<6}{row['kv_mib']:>8.1f}{row['prefill_median']:>9.1f} ({low:.1f}-{high:.1f})"
            f"{row['decode_median']:>9.1f} ({dlow:.1f}-{dhigh:.1f}){row['perplexity']:>12.3f}  "
            f"{'yes' if row['same_answer_as_f16'] else 'no'}"
        )
    if args.json:
        args.json.write_text(json.dumps({"model": path.name, "context": args.context, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
