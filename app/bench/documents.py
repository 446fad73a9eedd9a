"""``hearth bench documents``: where the time of an answer from documents goes, question by question, against raw
llama-cpp-python reading the very same prompt in the same run.

Each question goes through the page's own path (:class:`app.services.answering.chat.ChatService` into a throwaway
conversation store): embed the question, search, pack the passages, prefill, write. The raw side gets the messages
Hearth built (the same system prompt and passages) on the same GGUF, greedy both; the order alternates per question
so drift on a shared machine hits both alike. Reported per question and as medians with their spread: embed,
search, prompt tokens (and how many came from the cache), prefill, time to first token, decode tokens/s, total,
and the raw side's time to first token and decode tokens/s."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from app.bench.chat import open_raw_llama, progress, time_stream
from app.bench.documents_figures import (
    DocumentsSample,
    follow_up_figures,
    follow_up_lines,
    report_lines,
    sample_line,
    summarise,
)
from app.services.answering.turn_settings import TurnSettings
from backends.base import DEFAULT_PASSAGE_RECOMPUTE, TextDelta, Usage
from models.shared.errors import HearthError

DEFAULT_MAX_TOKENS = 128
CONVERSATIONS_DISK_MB = 2048  # the caches a restart finds, in the benchmark's own folder (the settings' defaults)
PASSAGES_DISK_MB = 512


def read_questions(path: Path) -> list[str]:
    """The ``question`` of each line of a JSON Lines file (the answer and retrieval sets both have one)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise HearthError(f"{path} cannot be read ({exc}).", "Give a JSON Lines file of questions.") from None
    questions = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise HearthError(
                f"Line {number} of {path.name} is not JSON.", 'Write one {"question": "..."} per line.'
            ) from None
        question = item.get("question") if isinstance(item, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise HearthError(f'Line {number} of {path.name} has no "question".', 'Write {"question": "..."}.')
        questions.append(question)
    return questions


def chosen_questions(args: argparse.Namespace) -> list[str]:
    """The questions of ``args.questions``, only its ``--part`` and at most ``--limit`` of them."""
    from app.cli.eval import split_part

    questions = read_questions(args.questions)
    if args.part is not None:
        questions = split_part(questions, args.questions, args.part)
    questions = questions[: args.limit] if args.limit else questions
    if not questions:
        raise HearthError(f"{args.questions} has no questions to ask.", "Give a JSON Lines file with questions.")
    return questions


def warm_set(args: argparse.Namespace) -> list[str]:
    """The questions of ``--warm-questions`` (at most ``--limit``), which a ``warm`` run asks; none without it."""
    if "warm" not in args.runs and args.warm_questions is None:
        return []
    if "warm" not in args.runs or args.warm_questions is None:
        raise HearthError(
            "A warm run asks other questions over the passages read before: it needs both.",
            "Give --runs cold,warm with --warm-questions FILE (bench/data/debian-docs-reworded.jsonl).",
        )
    questions = read_questions(args.warm_questions)
    questions = questions[: args.limit] if args.limit else questions
    if not questions:
        raise HearthError(f"{args.warm_questions} has no questions to ask.", "Give a JSON Lines file with questions.")
    return questions


RUNS = ("cold", "again", "warm", "restart")


@dataclass
class _Bench:
    """What the runs share: the questions, the raw side, the throwaway conversation store and its folder."""

    args: argparse.Namespace
    questions: list[str]
    warm_questions: list[str]
    raw: Any
    scratch: Path
    params: Any = None
    system: str = ""
    conversation: str | None = None
    read: set[tuple[str, str]] = dataclasses.field(
        default_factory=set
    )  # the passages given to a question so far (file, text)


def run_documents_bench(settings: Any, args: argparse.Namespace) -> int:
    """Each run of ``args.runs`` asks the questions once: ``cold`` first (nothing kept from before), ``again`` in
    the same engine (every passage read before: joined when ``--keep-passages``), ``warm`` the same engine asked
    ``--warm-questions`` (new questions over the passages read before), ``restart`` after Hearth is closed and
    started again on the caches it saved to disk (the kept passages', the conversations')."""
    from app.cli.eval import with_model
    from app.services.container import build_services, measuring

    questions = chosen_questions(args)
    warm_questions = warm_set(args)
    if args.bench_model is not None:
        settings = with_model(settings, args.bench_model)
    if args.recompute is not None and not args.keep_passages:
        raise HearthError("--recompute is about kept passages.", "Add --keep-passages, or leave it out.")
    runs: dict[str, list[DocumentsSample]] = {}
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as scratch_name:
        bench = _Bench(args, questions, warm_questions, None, Path(scratch_name))
        services = build_services(measuring(settings))
        try:
            model, plan = _start(services, bench)
            for name in args.runs:
                if name == "restart":
                    services.close()
                    progress("Hearth closed; starting it again on the caches it saved")
                    services = build_services(measuring(settings))
                    _start(services, bench)
                samples = _run(services, bench, name)
                if samples:
                    runs[name] = samples
                if len(samples) < len(questions):
                    break  # stopped
        finally:
            services.close()
            if bench.raw is not None:
                bench.raw.close()
    if not runs:
        return 130
    _report(args, runs, model.display_name, plan.label)
    return 0


def _start(services: Any, bench: _Bench) -> tuple[Any, Any]:
    """Load the model with its caches kept on disk in the benchmark's own folder (so the first run starts cold
    and a restart finds what it saved), and open the raw side once."""
    from backends.base import SavedCaches

    documents = services.documents.get()
    documents.manifest.get(bench.args.collection)  # a clear error before the model loads
    progress("loading the model into Hearth's engine process")
    passages_mb = PASSAGES_DISK_MB if bench.args.keep_passages else 0
    saved = SavedCaches(
        str(bench.scratch / "conversations"),
        CONVERSATIONS_DISK_MB << 20,
        str(bench.scratch / "passages"),
        passages_mb << 20,
        services.settings.backend.passage_cache_type,
    )
    if "restart" not in bench.args.runs:  # nothing on disk: the caches in memory only, held as the settings say
        saved = replace(saved, cap_bytes=0, passages_cap_bytes=0)
    choice = replace(services.control.initial, saved_caches=saved)
    for step in services.runtime.load(choice):
        progress(f"[{step.fraction:4.0%}] {step.message}")
    plan, model = services.runtime.status.plan, services.runtime.model
    assert plan is not None and model is not None
    if bench.raw is None:
        progress(f"opening raw llama-cpp-python on the same file ({model.display_name}, {plan.threads} threads)")
        bench.raw = open_raw_llama(model.path, plan.context_length, plan.threads)
        bench.params = replace(
            services.generation_params(),
            temperature=0.0,
            max_new_tokens=bench.args.max_tokens,
            seed=0,
            repeat_penalty=1.0,
        )
        if bench.args.recompute is not None:
            bench.params = replace(bench.params, passage_recompute=bench.args.recompute)
        bench.system = services.settings.generation.system_prompt
    documents.retriever.search(bench.args.collection, "warm up", top_k=1)  # the embedder and keyword index loaded
    return model, plan


def _run(services: Any, bench: _Bench, name: str) -> list[DocumentsSample]:
    """The questions once, through the page's own path, each against raw llama-cpp-python; in one conversation
    with ``--conversation`` (kept across the runs: a restart resumes it)."""
    from app.services.answering.chat import ChatService
    from app.services.library.conversations import ConversationStore

    args = bench.args
    questions = bench.warm_questions if name == "warm" else bench.questions
    samples: list[DocumentsSample] = []
    store = ConversationStore(bench.scratch / "conversations.db")
    chat = ChatService(store, services.runtime, services.documents.get, top_k=services.settings.rag.top_k)
    try:
        for number, question in enumerate(questions, start=1):
            progress(f"{name}: " * (len(args.runs) > 1) + f"question {number} of {len(questions)}")
            turn = TurnSettings(bench.params, bench.system, args.collection, keep_passages=args.keep_passages)
            sample, asked_in = _one_question(chat, bench, question, turn, number % 2)
            bench.conversation = asked_in if args.conversation else None
            samples.append(sample)
            print(sample_line(number, len(questions), sample), flush=True)
    except KeyboardInterrupt:
        progress(f"stopped after {len(samples)} of {len(questions)} questions")
    finally:
        store.close()
    return samples


def _report(args: argparse.Namespace, runs: dict[str, list[DocumentsSample]], model: str, backend: str) -> None:
    """Each run's medians and ratios printed; the first run's also at the top of the JSON, as before runs."""
    summaries: dict[str, dict[str, Any]] = {}
    for name, samples in runs.items():
        summary = summarise(samples)
        if len(runs) > 1:
            print(f"{name} run:")
        for line in report_lines(summary, model, backend):
            print(line)
        if args.conversation and len(samples) > 1:
            summary["follow_ups"] = follow_up_figures(samples)
            for line in follow_up_lines(summary["follow_ups"]):
                print(line)
        summaries[name] = summary | {"samples": [asdict(s) for s in samples]}
    if args.json:
        first = next(iter(summaries.values()))
        document = first | {
            "model": model,
            "backend": backend,
            "collection": args.collection,
            "max_tokens": args.max_tokens,
            "runs": summaries,
        }
        args.json.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def _one_question(
    chat: Any, bench: _Bench, question: str, turn: TurnSettings, raw_first: int
) -> tuple[DocumentsSample, str]:
    """One question's figures, and the conversation it went into (``bench.conversation``, or a new one)."""
    prompt = chat.next_prompt(bench.conversation, question, turn)
    messages = [{"role": m.role, "content": m.content} for m in prompt]
    if raw_first:
        raw_sample = _raw_answer(bench.raw, messages, turn.params.max_new_tokens)
        asked_in, hearth = _hearth_answer(chat, question, turn, bench.conversation, bench.read)
    else:
        asked_in, hearth = _hearth_answer(chat, question, turn, bench.conversation, bench.read)
        raw_sample = _raw_answer(bench.raw, messages, turn.params.max_new_tokens)
    raw_figures = {
        "raw_time_to_first_token_ms": raw_sample.time_to_first_token_ms,
        "raw_decode_tokens_per_s": raw_sample.decode_tokens_per_s,
    }
    return replace(hearth, **raw_figures), asked_in


def _hearth_answer(
    chat: Any, question: str, turn: TurnSettings, conversation: str | None, read: set[tuple[str, str]]
) -> tuple[str, DocumentsSample]:
    """The conversation the question went into, and Hearth's figures (the raw side's left at 0); ``read``, the
    passages given to earlier questions, gains this one's."""
    from app.services.answering.chat import TurnStarted

    started = time.perf_counter()
    head: TurnStarted | None = None
    first: float | None = None
    usage: Usage | None = None
    for event in chat.send(conversation, question, turn):
        if isinstance(event, TurnStarted):
            head = event
        elif isinstance(event, TextDelta) and event.text and first is None:
            first = time.perf_counter()
        elif isinstance(event, Usage):
            usage = event
    ended = time.perf_counter()
    if head is None or usage is None:
        raise HearthError(f"Hearth gave no answer to {question!r}.", "Run `hearth -v chat` with it to see why.")
    passages = {(source.path, source.text) for source in head.sources}
    read_before = bool(passages) and passages <= read
    read |= passages
    return head.conversation_id, DocumentsSample(
        question=question,
        embed_ms=head.embed_ms,
        search_ms=head.retrieve_ms - head.embed_ms,
        prompt_tokens=usage.prompt_tokens,
        cached_tokens=usage.cached_tokens,
        prefill_ms=usage.time_to_first_token_ms,
        time_to_first_token_ms=((first or ended) - started) * 1000,
        decode_tokens_per_s=usage.decode_tokens_per_s,
        total_ms=(ended - started) * 1000,
        raw_time_to_first_token_ms=0.0,
        raw_decode_tokens_per_s=0.0,
        joined_tokens=usage.joined_tokens,
        read_before=read_before,
    )


def _raw_answer(raw: Any, messages: list[dict[str, str]], max_tokens: int) -> Any:
    def pieces() -> Iterator[str]:
        for chunk in raw.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.0, stream=True):
            yield chunk["choices"][0]["delta"].get("content") or ""

    return time_stream("raw", pieces())


def add_question_set_arguments(parser: Any, at_least_one: Any) -> None:
    """The arguments of a benchmark that asks a question set from a collection."""
    parser.add_argument(
        "questions", type=Path, help='JSON Lines: {"question": "..."} (bench/data/debian-docs-answers.jsonl)'
    )
    parser.add_argument("--collection", "-c", required=True, help="collection to answer from")
    parser.add_argument(
        "--model", dest="bench_model", help="an id or file name from `hearth models list`, or a GGUF path"
    )
    parser.add_argument("--part", help="only this part of the set, as its split file names it: tuning or held-out")
    parser.add_argument("--limit", type=at_least_one, help="ask only the first N questions")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")


def add_documents_parser(kinds: Any, at_least_one: Any) -> None:
    parser = kinds.add_parser(
        "documents",
        help="an answer from documents step by step (embed, search, prefill, first token, decode) vs raw llama.cpp",
    )
    add_question_set_arguments(parser, at_least_one)
    parser.add_argument(
        "--max-tokens", type=at_least_one, default=DEFAULT_MAX_TOKENS, help="longest answer (default 128)"
    )
    parser.add_argument(
        "--conversation",
        action="store_true",
        help="ask the questions one after another in one conversation (follow-ups from the cache)",
    )
    parser.add_argument(
        "--keep-passages",
        action="store_true",
        help="keep each passage's cache when it is read and join it when a later question retrieves it",
    )
    add_recompute_argument(parser)
    parser.add_argument(
        "--runs",
        type=_runs,
        default=("cold",),
        help="ask the questions in each of these runs, comma-separated: cold (first), again (the same engine, every "
        "passage read before), warm (the same engine, the --warm-questions), restart (Hearth closed and started again "
        "on the caches it saved); default cold",
    )
    parser.add_argument(
        "--warm-questions",
        type=Path,
        help="JSON Lines of other questions over the same passages, for a warm run "
        "(bench/data/debian-docs-reworded.jsonl asks the held-out questions in other words)",
    )


def add_recompute_argument(parser: Any) -> None:
    parser.add_argument(
        "--recompute",
        type=_share,
        metavar="SHARE",
        help="with --keep-passages: the share of each joined passage's first tokens read again, from 0 to below 1 "
        f"(default {DEFAULT_PASSAGE_RECOMPUTE}, chosen on bench/passage_join.py)",
    )


def _share(text: str) -> float:
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0 <= share < 1:
        raise argparse.ArgumentTypeError(f"a share from 0 to below 1, such as 0.2 (got {text!r})")
    return share


def _runs(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in RUNS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"runs are {', '.join(RUNS)} (got {text!r})")
    return names


if __name__ == "__main__":  # pragma: no cover
    sys.exit("Run it as `hearth bench documents`.")
