"""``hearth bench lookup``: decode tokens/s with prompt-lookup decoding against without it, in the same run, on the
same loaded engine: answers from documents (the passages the page would give each question, so the answers copy
from them) and open questions (nothing to copy). Greedy; the order alternates per question so drift on a shared
machine hits both alike. Per question and as medians with their spread: decode tokens/s each way, their ratio,
the share of guessed tokens the model kept, and whether the two texts are the same (on a CPU without flash
attention a token evaluated with guesses after it can round differently, so a close call may flip)."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from app.bench.chat import QUESTIONS, SYSTEM, progress
from app.bench.stats import Spread, format_spread, noise_warning, spread
from app.services.answering.turn_settings import TurnSettings
from backends.base import CancelToken, ChatMessage, GenerationParams, TextDelta, Usage
from models.shared.errors import HearthError

DEFAULT_MAX_TOKENS = 128


@dataclass(frozen=True)
class LookupSample:
    """One question answered both ways."""

    question: str
    kind: str  # "documents" or "open"
    plain_tokens_per_s: float
    lookup_tokens_per_s: float
    drafted: int
    accepted: int
    same_text: bool

    @property
    def ratio(self) -> float:
        return self.lookup_tokens_per_s / self.plain_tokens_per_s if self.plain_tokens_per_s else 0.0


def summarise(samples: Sequence[LookupSample]) -> dict[str, Any]:
    """Per kind of question: decode tokens/s each way, the per-question ratio, the share of guesses kept (over all
    of that kind's guesses) and how many texts were the same."""
    kinds: dict[str, Any] = {}
    for kind in ("documents", "open"):
        chosen = [s for s in samples if s.kind == kind and s.plain_tokens_per_s > 0]
        if not chosen:
            continue
        drafted = sum(s.drafted for s in chosen)
        kinds[kind] = {
            "questions": len(chosen),
            "plain_tokens_per_s": spread([s.plain_tokens_per_s for s in chosen]).as_dict(),
            "lookup_tokens_per_s": spread([s.lookup_tokens_per_s for s in chosen]).as_dict(),
            "ratio": spread([s.ratio for s in chosen]).as_dict(),
            "accepted_share": sum(s.accepted for s in chosen) / drafted if drafted else 0.0,
            "drafted_per_question": drafted / len(chosen),
            "same_text": sum(s.same_text for s in chosen),
        }
    return kinds


def report_lines(summary: dict[str, Any], model: str) -> list[str]:
    lines = [f"{model}: prompt lookup against plain decoding, same engine, greedy"]
    warnings = []
    names = {"documents": "answers from documents", "open": "open questions"}
    for kind, figures in summary.items():
        plain, looked = Spread(**figures["plain_tokens_per_s"]), Spread(**figures["lookup_tokens_per_s"])
        ratio = Spread(**figures["ratio"])
        lines += [
            f"{names[kind]} ({figures['questions']}):",
            f"  decode tokens/s, plain          {plain.median:7.1f}   (min–max {plain.low:.1f}–{plain.high:.1f})",
            f"  decode tokens/s, lookup         {looked.median:7.1f}   (min–max {looked.low:.1f}–{looked.high:.1f})",
            f"  lookup/plain per question       {format_spread(ratio)}",
            f"  guesses kept                    {figures['accepted_share']:.0%} "
            f"({figures['drafted_per_question']:.0f} guessed a question)",
            f"  same text both ways             {figures['same_text']} of {figures['questions']}",
        ]
        warning = noise_warning(ratio, f"the {names[kind]} ratio")
        if warning:
            warnings.append(warning)
    return lines + warnings


def run_lookup_bench(settings: Any, args: argparse.Namespace) -> int:
    from app.bench.documents import chosen_questions
    from app.cli.commands import load_model
    from app.cli.eval import with_model
    from app.services.answering.chat import ChatService
    from app.services.container import build_services, measuring
    from app.services.library.conversations import ConversationStore

    questions = chosen_questions(args)
    if args.bench_model is not None:
        settings = with_model(settings, args.bench_model)
    services = build_services(measuring(settings))
    samples: list[LookupSample] = []
    try:
        documents = services.documents.get()
        documents.manifest.get(args.collection)  # a clear error before the model loads
        progress("loading the model into Hearth's engine process")
        load_model(services)
        model = services.runtime.model
        assert model is not None
        params = GenerationParams(temperature=0.0, max_new_tokens=args.max_tokens, seed=0, repeat_penalty=1.0)
        asks = [(question, "documents") for question in questions] + [(q, "open") for q in QUESTIONS[: args.open]]
        with tempfile.TemporaryDirectory(prefix="hearth-bench-") as scratch:
            store = ConversationStore(Path(scratch) / "conversations.db")
            chat = ChatService(store, services.runtime, services.documents.get, top_k=settings.rag.top_k)
            try:
                for number, (question, kind) in enumerate(asks, start=1):
                    progress(f"question {number} of {len(asks)} ({kind})")
                    if kind == "documents":
                        system = settings.generation.system_prompt
                        messages = list(
                            chat.next_prompt(None, question, TurnSettings(params, system, collection=args.collection))
                        )
                    else:
                        messages = [ChatMessage("system", SYSTEM), ChatMessage("user", question)]
                    sample = _both_ways(services.runtime, messages, params, question, kind, lookup_first=number % 2)
                    samples.append(sample)
                    print(
                        f"[{number}/{len(asks)}] {kind}: {sample.plain_tokens_per_s:5.1f} → "
                        f"{sample.lookup_tokens_per_s:5.1f} tok/s ({sample.ratio:.2f}x), kept {sample.accepted} "
                        f"of {sample.drafted} guesses, {'same text' if sample.same_text else 'text differs'}",
                        flush=True,
                    )
            except KeyboardInterrupt:
                progress(f"stopped after {len(samples)} of {len(asks)} questions")
            finally:
                store.close()
    finally:
        services.close()
    if not samples:
        return 130
    summary = summarise(samples)
    for line in report_lines(summary, model.display_name):
        print(line)
    if args.json:
        document = {
            "model": model.display_name,
            "collection": args.collection,
            "max_tokens": args.max_tokens,
            "kinds": summary,
            "samples": [asdict(s) | {"ratio": s.ratio} for s in samples],
        }
        args.json.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return 0


def _both_ways(
    runtime: Any, messages: Sequence[ChatMessage], params: GenerationParams, question: str, kind: str, lookup_first: int
) -> LookupSample:
    ways = [True, False] if lookup_first else [False, True]
    answers = {lookup: _answer(runtime, messages, replace(params, prompt_lookup=lookup)) for lookup in ways}
    (looked_text, looked), (plain_text, plain) = answers[True], answers[False]
    return LookupSample(
        question=question,
        kind=kind,
        plain_tokens_per_s=plain.decode_tokens_per_s,
        lookup_tokens_per_s=looked.decode_tokens_per_s,
        drafted=looked.drafted_tokens,
        accepted=looked.accepted_tokens,
        same_text=looked_text == plain_text,
    )


def _answer(runtime: Any, messages: Sequence[ChatMessage], params: GenerationParams) -> tuple[str, Usage]:
    text, usage = "", None
    with runtime.lease() as engine:
        for event in engine.stream_chat(messages, params, CancelToken()):
            if isinstance(event, TextDelta):
                text += event.text
            elif isinstance(event, Usage):
                usage = event
    if usage is None:
        raise HearthError("The engine gave no answer.", "Run `hearth -v chat` with the same model to see why.")
    return text, usage


def add_lookup_parser(kinds: Any, at_least_one: Any) -> None:
    parser = kinds.add_parser(
        "lookup", help="decode tokens/s with prompt-lookup decoding vs without, on answers from documents"
    )
    from app.bench.documents import add_question_set_arguments

    add_question_set_arguments(parser, at_least_one)
    parser.add_argument(
        "--open",
        type=int,
        default=len(QUESTIONS),
        choices=range(len(QUESTIONS) + 1),
        metavar=f"0-{len(QUESTIONS)}",
        help=f"also ask this many open questions without documents (default {len(QUESTIONS)})",
    )
    parser.add_argument(
        "--max-tokens", type=at_least_one, default=DEFAULT_MAX_TOKENS, help="longest answer (default 128)"
    )
