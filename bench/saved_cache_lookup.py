"""What choosing a saved conversation cache costs each request when the cap is full (the review
of 6c47b19 asked whether comparing the prompt with every saved cache in Python is a hot path).

Every request's start asks ``saved_slot_policy.to_restore`` which saved cache holds most of its prompt. The worst
case for the default 2 GB cap: about 70 caches of 2,000 tokens (30 MB each with the default model), every one
sharing the same system prompt (so each comparison runs at least that far), and a prompt that continues one of
them (that comparison runs its whole length), then one that continues none. The figure is beside the time the
engine takes to read the prompt's new tokens, which the lookup precedes.

    .venv/bin/python bench/saved_cache_lookup.py --out bench/data/saved-cache-lookup.txt
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.llamacpp.caches.saved_slot_policy import Saved, to_restore  # noqa: E402


def caches(count: int, tokens: int, shared: int, seed: int) -> list[Saved]:
    rng = random.Random(seed)
    system = [rng.randrange(50_000) for _ in range(shared)]
    return [
        Saved(f"{i}.kv", tuple(system + [rng.randrange(50_000) for _ in range(tokens - shared)]), 30 << 20, float(i))
        for i in range(count)
    ]


def timed(saved: list[Saved], prompt: list[int], reused: int, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        to_restore(saved, prompt, reused)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--caches", type=int, default=70)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--shared", type=int, default=150, help="system prompt tokens every cache begins with")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    saved = caches(args.caches, args.tokens, args.shared, seed=1)
    system = list(saved[0].tokens[: args.shared])
    continuing = [*saved[len(saved) // 2].tokens, *range(100)]
    found = to_restore(saved, continuing, args.shared)
    assert found is not None and found.reused == args.tokens, "the continued cache must be the one chosen"
    lines = [f"{args.caches} saved caches of {args.tokens} tokens, all beginning with the same {args.shared}:"]
    for name, prompt in (("continues one of them", continuing), ("continues none", system + [7] * 1000)):
        times = timed(saved, prompt, args.shared, args.runs)
        lines.append(
            f"  a prompt that {name}: median {statistics.median(times):.2f} ms "
            f"(min {min(times):.2f}, max {max(times):.2f}) over {args.runs} lookups"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
