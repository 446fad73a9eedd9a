"""``hearth bench chat``: Hearth's chat path against raw llama-cpp-python, in one run, on the same model.

Both sides answer the same questions greedily, interleaved (raw, Hearth, raw, Hearth, …) so drift on a shared
machine hits both alike. Both are timed the same way from outside: time to the first piece of text, and text
pieces per second after it. Results are reported as medians and as Hearth/raw ratios; each round's ratio is taken
against the raw answer of the same round, and the ratios' spread (min–max, IQR) is printed with a warning when it
is too wide to trust. Progress (phase, run k of n) goes to stderr as it happens.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.bench.stats import paired_ratios, spread, spread_lines
from app.services.answering.turn_settings import TurnSettings
from backends.base import TextDelta

QUESTIONS = (
    "Explain in a few sentences why the sky is blue.",
    "Give me three tips for writing clear emails.",
    "What is the difference between a list and a tuple in Python?",
    "Describe how a bicycle gear system works.",
    "Write a short poem about a candle in the window.",
    "Summarise the water cycle for a ten-year-old.",
    "What should I pack for a weekend hiking trip?",
)
SYSTEM = "You are a helpful assistant."
RATIO_FIELDS = (("decode_tokens_per_s", "decode tokens/s"), ("time_to_first_token_ms", "time to first token"))


def progress(line: str) -> None:
    """One line of what the benchmark is doing now, on stderr (stdout keeps the report)."""
    sys.stderr.write(f"bench: {line}\n")
    sys.stderr.flush()


@dataclass(frozen=True)
class Sample:
    side: str
    time_to_first_token_ms: float
    tokens: int
    decode_tokens_per_s: float


def time_stream(side: str, pieces: Iterable[str]) -> Sample:
    started = time.perf_counter()
    first: float | None = None
    count = 0
    for piece in pieces:
        if not piece:
            continue
        now = time.perf_counter()
        first = first or now
        count += 1
    ended = time.perf_counter()
    ttft = ((first or ended) - started) * 1000
    decode_s = ended - (first or ended)
    rate = (count - 1) / decode_s if count > 1 and decode_s > 0 else 0.0
    return Sample(side, ttft, count, rate)


def open_raw_llama(path: Path, context_length: int, threads: int, tensor_overrides: Any = None, **settings: Any) -> Any:
    """Bare llama-cpp-python on the same GGUF: the "raw" side of every benchmark, with the context Hearth's engine
    creates (flash attention, its threads for reading and writing) unless ``settings`` (``Llama``'s own keywords)
    say otherwise. Loaded verbose with its logs routed to logging, as Hearth's own backend does (verbose=False
    redirects the process's stdout while loading)."""
    from backends.llamacpp.buffers import open_llama
    from backends.llamacpp.log_route import route_llama_logs
    from backends.llamacpp.native import FLASH_ATTENTION

    route_llama_logs()
    engine_like = {"n_threads": threads, "n_threads_batch": threads, "flash_attn": FLASH_ATTENTION}
    llm = open_llama(
        tensor_overrides, model_path=str(path), n_ctx=context_length, verbose=True, **(engine_like | settings)
    )
    llm.verbose = False
    return llm


def raw_pieces(llm: object, question: str, max_tokens: int) -> Iterator[str]:
    stream = llm.create_chat_completion(  # type: ignore[attr-defined]
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        max_tokens=max_tokens,
        temperature=0.0,
        stream=True,
    )
    for chunk in stream:
        yield chunk["choices"][0]["delta"].get("content") or ""


def run_chat_bench(args: argparse.Namespace) -> int:
    from app.services.container import build_services, measuring
    from app.settings import load_settings
    from backends.base import GenerationParams

    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as home:
        overrides: dict[str, object] = {"home": home, "generation": {"temperature": 0.0}}
        if args.model:
            overrides["model"] = {"path": args.model}
        settings = load_settings(**overrides)
        services = build_services(measuring(settings))
        try:
            progress("loading the model into Hearth's engine process")
            for step in services.runtime.load(services.model_choice()):
                progress(f"  {step.message}")
            plan = services.runtime.status.plan
            assert plan is not None
            model = services.runtime.model
            assert model is not None
            progress(f"opening raw llama-cpp-python on the same file ({model.display_name}, {plan.threads} threads)")
            raw = open_raw_llama(model.path, plan.context_length, plan.threads)
            # Same sampling as llama-cpp-python's defaults, so both sides produce the same tokens.
            params = GenerationParams(temperature=0.0, max_new_tokens=args.max_tokens, repeat_penalty=1.0)
            samples: list[Sample] = []
            progress("warming up both sides (one short answer each, not counted)")
            list(raw_pieces(raw, "Hello", 8))
            list(services.chat.send(None, "Hello", TurnSettings(GenerationParams(0.0, 8), SYSTEM)))
            for index in range(args.runs):
                question = QUESTIONS[index % len(QUESTIONS)]
                run = f"run {index + 1} of {args.runs}"
                progress(f"{run}: raw llama-cpp-python…")
                samples.append(time_stream("raw", raw_pieces(raw, question, args.max_tokens)))
                progress(f"{run}: Hearth…")
                events = services.chat.send(None, question, TurnSettings(params, SYSTEM))
                samples.append(time_stream("hearth", (e.text for e in events if isinstance(e, TextDelta))))
                raw_rate, hearth_rate = samples[-2].decode_tokens_per_s, samples[-1].decode_tokens_per_s
                ratio = f"{hearth_rate / raw_rate:.2f}" if raw_rate else "n/a"
                progress(f"{run}: decode {raw_rate:.1f} raw, {hearth_rate:.1f} Hearth tokens/s (Hearth/raw {ratio})")
            raw.close()
        finally:
            services.close()
    report = summarise(samples, model.display_name, plan.label, args.max_tokens)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report | {"samples": [asdict(s) for s in samples]}, indent=2))
    return 0


def summarise(samples: list[Sample], model: str, backend: str, max_tokens: int) -> dict[str, object]:
    def median(side: str, field: str) -> float:
        return float(statistics.median(getattr(s, field) for s in samples if s.side == side))

    def per_run(side: str, field: str) -> list[float]:
        return [float(getattr(s, field)) for s in samples if s.side == side]

    result: dict[str, object] = {"model": model, "backend": backend, "max_tokens": max_tokens}
    for field in ("time_to_first_token_ms", "decode_tokens_per_s", "tokens"):
        raw, hearth = median("raw", field), median("hearth", field)
        result[field] = {"raw": raw, "hearth": hearth, "ratio": hearth / raw if raw else 0.0}
    ratios = {}
    for field, _ in RATIO_FIELDS:
        paired = paired_ratios(per_run("hearth", field), per_run("raw", field))
        if paired:
            ratios[field] = spread(paired).as_dict()
            # The ratio shown is the median of each round's own ratio, the figure the spread is about.
            row = result[field]
            assert isinstance(row, dict)
            row["ratio"] = ratios[field]["median"]
    result["ratio_spread"] = ratios
    return result


def print_report(report: dict[str, object]) -> None:
    out = sys.stdout
    out.write(f"model {report['model']} on {report['backend']}, up to {report['max_tokens']} tokens per answer\n")
    out.write(f"{'median':<24}{'llama-cpp-python':>18}{'Hearth':>12}{'Hearth/raw':>12}\n")
    for field, label in (
        ("time_to_first_token_ms", "time to first token ms"),
        ("decode_tokens_per_s", "decode tokens/s"),
        ("tokens", "tokens per answer"),
    ):
        row = report[field]
        assert isinstance(row, dict)
        out.write(f"{label:<24}{row['raw']:>18.1f}{row['hearth']:>12.1f}{row['ratio']:>12.2f}\n")
    print_ratio_spreads(report)


def print_ratio_spreads(report: dict[str, object]) -> None:
    """Each run's Hearth/raw ratio (against the raw answer of the same round): median, min–max and IQR."""
    out = sys.stdout
    spreads = report.get("ratio_spread")
    assert isinstance(spreads, dict)
    out.write("Hearth/raw per run, each against the raw answer of the same round:\n")
    rows = [(label, spreads.get(field)) for field, label in RATIO_FIELDS]
    out.write("".join(f"{line}\n" for line in spread_lines(rows, 22, "no run measured it")))
    out.flush()
