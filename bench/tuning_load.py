"""How long the trainer takes to read a GGUF into transformers, as transformers does it alone and with the trainer's
memories (models/tuning/gguf_reading.py: one reader per file, one tensor name map per architecture); each way in a
fresh interpreter, alternating, several runs; the medians, the spread, and a digest of the weights read each way
(they must be the same).

    .venv/bin/python bench/tuning_load.py --runs 3 --out bench/data/tuning-load.txt [--model FILE.gguf]

Run it alone on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

PROBE = """
import contextlib, hashlib, json, sys, time
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM
from models.tuning.gguf_reading import reading_once
base = Path(sys.argv[1])
reading = reading_once() if sys.argv[2] == "kept" else contextlib.nullcontext()
started = time.perf_counter()
with reading:
    model = AutoModelForCausalLM.from_pretrained(str(base.parent), gguf_file=base.name, dtype=torch.float32)
seconds = time.perf_counter() - started
digest = hashlib.sha256()
for name, tensor in sorted(model.state_dict().items()):
    digest.update(name.encode())
    digest.update(tensor.detach().contiguous().numpy().tobytes())
print(json.dumps({"seconds": seconds, "digest": digest.hexdigest()}))
"""

WAYS = {"transformers alone": "plain", "with the trainer's memories": "kept"}


def load(model: Path, way: str) -> dict[str, float | str]:
    root = Path(__file__).resolve().parents[1]
    ran = subprocess.run(
        [sys.executable, "-c", PROBE, str(model), way],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    result: dict[str, float | str] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded model)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.model is None:
        from models.embedded import embedded_chat_model

        args.model = embedded_chat_model()
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    digests: dict[str, set[str]] = {way: set() for way in WAYS}
    for run in range(args.runs):
        for way, code in WAYS.items():
            result = load(args.model, code)
            seconds[way].append(float(result["seconds"]))
            digests[way].add(str(result["digest"]))
            print(f"run {run + 1}/{args.runs}, {way}: {float(result['seconds']):.1f} s", file=sys.stderr, flush=True)
    lines = [
        f"# {' '.join([Path(sys.executable).name, *sys.argv])}",
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()};"
        f" transformers {version('transformers')}, gguf {version('gguf')}; model {args.model.name};"
        f" {args.runs} runs each, alternating, each in a fresh interpreter",
    ]
    for way, runs in seconds.items():
        lines.append(
            f"{way}: median {statistics.median(runs):.1f} s (runs {min(runs):.1f}-{max(runs):.1f} s);"
            f" weights digest {', '.join(sorted(d[:16] for d in digests[way]))}"
        )
    alone, kept = (statistics.median(runs) for runs in seconds.values())
    lines.append(f"with the memories / alone: {kept / alone:.2f}")
    same = len(digests["transformers alone"] | digests["with the trainer's memories"]) == 1
    lines.append("the same weights both ways" if same else "THE WEIGHTS DIFFER")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
