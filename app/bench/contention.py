"""``hearth bench contention``: an answer written while a file is indexed, against each alone, in the same run.

Four phases on one loaded engine and a scratch data folder: answers alone (decode tokens/s); the file indexed alone
(seconds); the file indexed while answers are written one after another, with Hearth's sharing of the cores (the
engine on fewer threads, the embedder on its share, ``app/services/library/cpu_share.py``); and the same without sharing
(both on every core, as before it). For each together-phase: the answers' decode tokens/s against alone, and the
indexing's speed against alone. Goal: an answer keeps at least half its quiet speed and indexing keeps moving."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.bench.chat import QUESTIONS, SYSTEM, progress
from backends.base import CancelToken, ChatMessage, GenerationParams, Usage
from models.shared.errors import HearthError

DEFAULT_MAX_TOKENS = 96


@dataclass
class Phase:
    decode_tokens_per_s: list[float] = field(default_factory=list)  # one per answer written in the phase
    index_s: float = 0.0  # 0: the phase indexed nothing
    chunks: int = 0

    @property
    def decode_median(self) -> float:
        return statistics.median(self.decode_tokens_per_s) if self.decode_tokens_per_s else 0.0


def summarise(phases: dict[str, Phase]) -> dict[str, Any]:
    """Each together-phase's decode speed and indexing speed as shares of the quiet phases'."""
    quiet_decode = phases["answers alone"].decode_median
    quiet_index = phases["indexing alone"].index_s
    shares = {}
    for name, phase in phases.items():
        if phase.decode_tokens_per_s and phase.index_s:
            shares[name] = {
                "decode_vs_alone": phase.decode_median / quiet_decode if quiet_decode else 0.0,
                "indexing_vs_alone": quiet_index / phase.index_s if phase.index_s else 0.0,
            }
    return {"phases": {name: asdict(p) | {"decode_median": p.decode_median} for name, p in phases.items()}} | {
        "together": shares
    }


def report_lines(summary: dict[str, Any], model: str, file: str) -> list[str]:
    lines = [f"{model}; indexing {file}", f"{'phase':<34}{'decode tok/s':>14}{'indexing':>12}{'answers':>9}"]
    for name, phase in summary["phases"].items():
        decode = f"{phase['decode_median']:.1f}" if phase["decode_tokens_per_s"] else "–"
        index = f"{phase['index_s']:.1f} s" if phase["index_s"] else "–"
        lines.append(f"{name:<34}{decode:>14}{index:>12}{len(phase['decode_tokens_per_s']):>9}")
    for name, phase in summary["phases"].items():
        if phase["index_s"] and name != "indexing alone" and not phase["decode_tokens_per_s"]:
            lines.append(f"{name}: no answer ended while the file was indexed; give a longer file")
    for name, share in summary["together"].items():
        lines.append(
            f"{name}: answers at {share['decode_vs_alone']:.2f}x their speed alone, indexing at "
            f"{share['indexing_vs_alone']:.2f}x"
        )
    return lines


def run_contention_bench(settings: Any, args: argparse.Namespace) -> int:
    from app.cli.commands import load_model
    from app.cli.eval import with_model
    from app.services.container import build_services, measuring

    if not args.file.is_file():
        raise HearthError(f"{args.file} is not a file.", "Give a document to index, such as a PDF manual.")
    if args.bench_model is not None:
        settings = with_model(settings, args.bench_model)
    phases: dict[str, Phase] = {}
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as home:
        # A scratch data folder for the collections; the model as the settings (or --model) name it.
        services = build_services(measuring(settings.model_copy(update={"home": Path(home)})))
        try:
            progress("loading the model into Hearth's engine process")
            load_model(services)
            model = services.runtime.model
            assert model is not None
            params = GenerationParams(temperature=0.0, max_new_tokens=args.max_tokens, seed=0, repeat_penalty=1.0)
            documents = services.documents.get()
            documents.embedder.embed(["warm up"])  # loaded before anything is timed
            answer = _answerer(services, params)
            progress("answers alone")
            phases["answers alone"] = Phase([answer(i) for i in range(args.answers)])
            progress("indexing alone")
            phases["indexing alone"] = _index(documents, args.file, "alone", None, None)
            sharing = services.cpu
            progress("indexing while answering, the cores shared")
            phases["together, cores shared"] = _together(documents, args.file, "shared", answer, sharing)
            progress("indexing while answering, every core for both (before)")
            phases["together, not shared"] = _together(documents, args.file, "unshared", answer, None)
        finally:
            services.close()
    summary = summarise(phases)
    for line in report_lines(summary, model.display_name, args.file.name):
        print(line)
    if args.json:
        document = {"model": model.display_name, "file": str(args.file), "max_tokens": args.max_tokens} | summary
        args.json.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return 0


def _answerer(services: Any, params: GenerationParams) -> Callable[[int], float]:
    def answer(number: int) -> float:
        messages = [ChatMessage("system", SYSTEM), ChatMessage("user", QUESTIONS[number % len(QUESTIONS)])]
        usage = None
        with services.runtime.lease() as engine:
            for event in engine.stream_chat(messages, params, CancelToken()):
                if isinstance(event, Usage):
                    usage = event
        if usage is None:
            raise HearthError("The engine gave no answer.", "Run `hearth -v chat` with the same model to see why.")
        return usage.decode_tokens_per_s

    return answer


def _index(documents: Any, file: Path, collection: str, sharing: Any, chatting: threading.Event | None) -> Phase:
    from rag.ingest import FileOutcome

    documents.ingestor.open_collection(collection)
    started = time.perf_counter()
    chunks = 0
    before = sharing.before_batch if sharing is not None else None
    for event in documents.ingestor.ingest([file], collection, CancelToken(), before):
        if isinstance(event, FileOutcome):
            if event.outcome == "skipped":
                raise HearthError(f"{file.name} could not be indexed: {event.reason}", "Give another document.")
            chunks += event.chunks
    phase = Phase(index_s=time.perf_counter() - started, chunks=chunks)
    if chatting is not None:
        chatting.set()
    return phase


def _together(documents: Any, file: Path, collection: str, answer: Callable[[int], float], sharing: Any) -> Phase:
    """Index ``file`` while answers are written one after another until it is done; only answers that ended before
    the indexing count."""
    done = threading.Event()
    result: list[Phase | BaseException] = []

    def index() -> None:
        try:
            if sharing is not None:
                with sharing.indexing():
                    result.append(_index(documents, file, collection, sharing, done))
            else:
                result.append(_index(documents, file, collection, None, done))
        except BaseException as exc:  # reported below
            result.append(exc)
            done.set()

    indexing = threading.Thread(target=index, name="bench indexing")
    indexing.start()
    speeds: list[float] = []
    number = 0
    while not done.is_set():
        speed = answer(number)
        number += 1
        if not done.is_set():
            speeds.append(speed)
    indexing.join()
    outcome = result[0]
    if isinstance(outcome, BaseException):
        raise outcome
    outcome.decode_tokens_per_s = speeds
    return outcome


def add_contention_parser(kinds: Any, at_least_one: Any) -> None:
    parser = kinds.add_parser(
        "contention", help="an answer while a file is indexed: both speeds against each alone, shared or not"
    )
    parser.add_argument("file", type=Path, help="a document to index (a PDF manual of ~200 pages, say)")
    parser.add_argument(
        "--model", dest="bench_model", help="an id or file name from `hearth models list`, or a GGUF path"
    )
    parser.add_argument("--answers", type=at_least_one, default=3, help="answers alone (default 3)")
    parser.add_argument(
        "--max-tokens", type=at_least_one, default=DEFAULT_MAX_TOKENS, help="tokens per answer (default 96)"
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
