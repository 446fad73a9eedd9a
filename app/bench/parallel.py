"""``hearth bench parallel``: aggregate tokens/s when 1, 2, 4… answers are written at once through Hearth's
runtime (the engine process, its batched slots), against one stream of raw llama-cpp-python in the same run.

Rounds interleave every configuration (raw, then each stream count) so drift on a shared machine hits them
alike. Every stream answers a different question greedily with a fixed length, so each configuration does the
same work per stream. Aggregate = all completion tokens / wall time from the first request to the last token.
Each round's rate is divided by the raw stream's rate of the same round; the ratios' spread over the rounds is
printed beside the medians, with a warning when it is too wide to trust. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from app.bench.chat import QUESTIONS, SYSTEM, open_raw_llama, progress, raw_pieces
from app.bench.stats import paired_ratios, spread, spread_lines
from backends.base import CancelToken, ChatMessage, GenerationParams, Usage


@dataclass(frozen=True)
class Round:
    streams: int  # 0 is the raw llama-cpp-python stream
    tokens: int
    wall_s: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0


def run_parallel_bench(args: argparse.Namespace) -> int:
    from app.services.container import build_services, measuring
    from app.settings import load_settings

    counts = sorted({int(c) for c in args.streams.split(",")})
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as home:
        overrides: dict[str, Any] = {"home": home, "backend": {"name": "llamacpp", "slots": max(counts)}}
        if args.model:
            overrides["model"] = {"path": args.model}
        services = build_services(measuring(load_settings(**overrides)))
        rounds: list[Round] = []
        try:
            progress("loading the model into Hearth's engine process")
            for step in services.control.start():
                progress(f"  {step.message}")
            plan, model = services.runtime.status.plan, services.runtime.model
            assert plan is not None and model is not None
            progress(f"opening raw llama-cpp-python on the same file ({model.display_name}, {plan.threads} threads)")
            raw = open_raw_llama(model.path, plan.context_length, plan.threads)
            params = GenerationParams(temperature=0.0, max_new_tokens=args.max_tokens, repeat_penalty=1.0)
            progress("warming up (one short answer, not counted)")
            hearth_round(services.runtime, 1, GenerationParams(0.0, 8))
            for index in range(args.runs):
                run = f"round {index + 1} of {args.runs}"
                progress(f"{run}: raw llama-cpp-python, 1 stream…")
                started = time.perf_counter()
                pieces = sum(1 for piece in raw_pieces(raw, QUESTIONS[0], args.max_tokens) if piece)
                rounds.append(Round(0, pieces, time.perf_counter() - started))
                for count in counts:
                    progress(f"{run}: Hearth, {count} stream{'s' * (count != 1)} at once…")
                    rounds.append(hearth_round(services.runtime, count, params))
            raw.close()
        finally:
            services.close()
    report = summarise(rounds, counts, model.display_name, plan.label, plan.threads, args.max_tokens)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report | {"rounds": [asdict(r) for r in rounds]}, indent=2))
    return 0


def hearth_round(runtime: Any, streams: int, params: GenerationParams) -> Round:
    tokens = [0] * streams
    errors: list[BaseException] = []
    go = threading.Barrier(streams + 1)

    def answer(index: int) -> None:
        question = QUESTIONS[index % len(QUESTIONS)]
        messages = [ChatMessage("system", SYSTEM), ChatMessage("user", question)]
        try:
            with runtime.lease() as engine:
                go.wait()
                for event in engine.stream_chat(messages, params, CancelToken()):
                    if isinstance(event, Usage):
                        tokens[index] = event.completion_tokens
        except BaseException as exc:  # reported after the round
            errors.append(exc)

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(streams)]
    for thread in threads:
        thread.start()
    go.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if errors:
        raise errors[0]
    return Round(streams, sum(tokens), wall)


def summarise(
    rounds: list[Round], counts: list[int], model: str, backend: str, threads: int, max_tokens: int
) -> dict[str, Any]:
    def median_rate(streams: int) -> float:
        return float(statistics.median(r.tokens_per_s for r in rounds if r.streams == streams))

    def rates(streams: int) -> list[float]:
        return [r.tokens_per_s for r in rounds if r.streams == streams]

    raw = median_rate(0)
    one = median_rate(counts[0])
    rows = []
    for count in counts:
        paired = spread(paired_ratios(rates(count), rates(0))) if raw else None
        rows.append(
            {
                "streams": count,
                "aggregate_tokens_per_s": median_rate(count),
                "vs_one_stream": median_rate(count) / one if one else 0.0,
                # The median of each round's own ratio: the figure the spread below is about.
                "vs_raw": paired.median if paired else 0.0,
                "vs_raw_spread": paired.as_dict() if paired else None,
            }
        )
    return {
        "model": model,
        "backend": backend,
        "threads": threads,
        "max_tokens": max_tokens,
        "raw_tokens_per_s": raw,
        "rows": rows,
    }


def print_report(report: dict[str, Any]) -> None:
    out = sys.stdout
    out.write(
        f"model {report['model']} on {report['backend']} ({report['threads']} threads), "
        f"{report['max_tokens']} tokens per answer, medians\n"
    )
    out.write(f"raw llama-cpp-python, 1 stream: {report['raw_tokens_per_s']:.1f} tokens/s\n")
    out.write(f"{'streams':>8}{'aggregate tok/s':>18}{'vs 1 stream':>14}{'vs raw':>10}\n")
    for row in report["rows"]:
        out.write(
            f"{row['streams']:>8}{row['aggregate_tokens_per_s']:>18.1f}{row['vs_one_stream']:>14.2f}"
            f"{row['vs_raw']:>10.2f}\n"
        )
    out.write("vs raw per round, each against the raw stream of the same round:\n")
    rows = [(f"{row['streams']} stream{'s' * (row['streams'] != 1)}", row["vs_raw_spread"]) for row in report["rows"]]
    out.write("".join(f"{line}\n" for line in spread_lines(rows, 12, "no round measured it")))
    out.flush()
