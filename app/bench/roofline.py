"""``hearth bench roofline``: this machine's memory read bandwidth, the bytes each model reads per generated token,
and decode tokens/s as a share of the ceiling those two set, for raw llama-cpp-python and for Hearth's engine,
measured in the same run (``backends/roofline.py`` has the arithmetic)."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from typing import Any

from app.bench.chat import QUESTIONS, SYSTEM, open_raw_llama, progress, raw_pieces, time_stream
from app.services.answering.turn_settings import TurnSettings
from backends.base import TextDelta
from backends.memory import format_bytes
from backends.read_speed import read_bandwidth


def run_roofline_bench(args: argparse.Namespace) -> int:
    from app.services.container import build_services, measuring
    from app.settings import load_settings
    from backends.base import GenerationParams
    from backends.roofline import bytes_per_token, ceiling_tokens_per_s, share_of_ceiling
    from models.embedded import embedded_chat_model
    from models.gguf import read_model_info

    progress(f"reading memory with {args.threads} threads")
    bandwidths = read_bandwidth(args.threads)
    bandwidth = max(bandwidths)  # what the machine can do; a lower run was something else wanting the memory
    rows: list[dict[str, Any]] = []
    for path in args.model or [embedded_chat_model()]:
        model = read_model_info(path)
        raw_rates: list[float] = []
        hearth_rates: list[float] = []
        with tempfile.TemporaryDirectory(prefix="hearth-bench-") as home:
            settings = load_settings(
                home=home,
                model={"path": str(path), "context_length": 2048},
                backend={"threads": args.threads, "slots": 1},
                generation={"temperature": 0.0},
            )
            services = build_services(measuring(settings))
            try:
                progress(f"{model.display_name}: loading Hearth's engine and raw llama-cpp-python")
                list(services.runtime.load(services.model_choice()))
                raw = open_raw_llama(path, 2048, args.threads)
                params = GenerationParams(temperature=0.0, max_new_tokens=args.max_tokens, repeat_penalty=1.0)
                list(raw_pieces(raw, "Hello", 8))  # warm-up, not counted
                list(services.chat.send(None, "Hello", TurnSettings(GenerationParams(0.0, 8), SYSTEM)))
                for index in range(args.runs):
                    question = QUESTIONS[index % len(QUESTIONS)]
                    progress(f"{model.display_name}: round {index + 1} of {args.runs}")
                    raw_rates.append(time_stream("raw", raw_pieces(raw, question, args.max_tokens)).decode_tokens_per_s)
                    events = services.chat.send(None, question, TurnSettings(params, SYSTEM))
                    sample = time_stream("hearth", (e.text for e in events if isinstance(e, TextDelta)))
                    hearth_rates.append(sample.decode_tokens_per_s)
                raw.close()
            finally:
                services.close()
        step = bytes_per_token(model, context_used=300)  # about a question and a short answer in the cache
        raw_rate, hearth_rate = statistics.median(raw_rates), statistics.median(hearth_rates)
        rows.append(
            {
                "model": model.display_name,
                "bytes_per_token": step,
                "ceiling_tokens_per_s": ceiling_tokens_per_s(bandwidth, step),
                "raw_tokens_per_s": raw_rate,
                "raw_share": share_of_ceiling(raw_rate, bandwidth, step),
                "hearth_tokens_per_s": hearth_rate,
                "hearth_share": share_of_ceiling(hearth_rate, bandwidth, step),
                "raw_runs": raw_rates,
                "hearth_runs": hearth_rates,
            }
        )
    report = {"threads": args.threads, "bandwidth_bytes_per_s": bandwidth, "bandwidth_runs": bandwidths, "rows": rows}
    print_roofline(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def print_roofline(report: dict[str, Any]) -> None:
    runs = report["bandwidth_runs"]
    print(
        f"memory read bandwidth: {report['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s with {report['threads']} threads "
        f"(best of {len(runs)}; {min(runs) / 1e9:.1f}-{max(runs) / 1e9:.1f})"
    )
    print(f"{'model':<36}{'read/token':>12}{'ceiling':>10}{'raw tok/s':>16}{'Hearth tok/s':>18}")
    for row in report["rows"]:
        print(
            f"{row['model']:<36}{format_bytes(row['bytes_per_token']):>12}{row['ceiling_tokens_per_s']:>10.1f}"
            f"{row['raw_tokens_per_s']:>9.1f} ({row['raw_share']:.0%})"
            f"{row['hearth_tokens_per_s']:>11.1f} ({row['hearth_share']:.0%})"
        )
