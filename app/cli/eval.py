"""`hearth eval answers`: ask a question set through the page's own path and score the answers.

Each question goes through :class:`app.services.answering.chat.ChatService` exactly as the page sends it
(retrieval, passage packing, the RAG prompt, the runtime's engine), into a throwaway conversation store, so the
user's conversations are never touched. Scoring is :mod:`rag.answer_eval`'s rule. Answers are greedy
(temperature 0) so a rerun on the same model and collection gives the same figure.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.answering.chat import ChatService, TurnSaved, TurnStarted
from app.services.answering.turn_settings import TurnSettings
from app.settings import Settings
from app.terminal_text import for_terminal
from backends.base import Finished, TextDelta, Usage
from models.shared.errors import HearthError
from models.shared.wording import shorten
from rag.answer_eval import (
    AnswerQuestion,
    AnswerReport,
    AnswerResult,
    read_answer_questions,
    result_record,
    score_answer,
)

EXIT_OK = 0
EXIT_INTERRUPTED = 130
if TYPE_CHECKING:
    from app.services.container import Services

DEFAULT_MAX_TOKENS = 200
EVAL_PASSAGES_MB = 4096  # disk for kept passages' caches in an evaluation's own folder (``_load``)
SHOWN_CHARS = 70

T = TypeVar("T")


def run_eval_answers(
    settings: Settings,
    questions_path: Path,
    collection: str,
    model: str | None,
    limit: int | None,
    output: Path | None,
    max_tokens: int,
    part: str | None = None,
    keep_passages: bool = False,
    recompute: float | None = None,
    read_first: Path | None = None,
) -> int:
    """``keep_passages``: answer keeping each passage's cache as it is read and joining it when a
    later question retrieves the passage, to measure what that does to the answers; ``recompute``: the
    share of each joined passage read again (the engine's default when None); ``read_first``: a question set asked
    before (its ``part`` and ``limit`` too, one token each, not scored), so that the passages it retrieves have
    been read."""
    from app.services.container import build_services, measuring
    from app.services.library.conversations import ConversationStore

    if max_tokens < 1:
        raise HearthError("--max-tokens must be 1 or more.", f"Leave it out for {DEFAULT_MAX_TOKENS}.")
    questions = chosen_questions(read_answer_questions, questions_path, part, limit, output)
    first = chosen_questions(read_answer_questions, read_first, part, limit, None) if read_first else []
    if (read_first or recompute is not None) and not keep_passages:
        raise HearthError(
            "--read-first and --recompute are about kept passages.", "Add --keep-passages, or leave them out."
        )
    if model is not None:
        settings = with_model(settings, model)
    services = build_services(measuring(settings))
    results: list[AnswerResult] = []
    try:
        documents = services.documents.get()
        documents.manifest.get(collection)  # a clear error before the model loads
        with tempfile.TemporaryDirectory(prefix="hearth-eval-") as scratch:
            _load(services, Path(scratch) / "passages" if keep_passages else None)
            _ = documents.embedder.dimension  # loaded now, not inside the first question's time
            params = replace(services.generation_params(), temperature=0.0, max_new_tokens=max_tokens, seed=0)
            if recompute is not None:
                params = replace(params, passage_recompute=recompute)
            store = ConversationStore(Path(scratch) / "conversations.db")
            chat = ChatService(store, services.runtime, services.documents.get, top_k=settings.rag.top_k)
            try:
                model_name = services.runtime.model.display_name if services.runtime.model else "?"
                print(
                    f"Asking {len(questions)} questions of {for_terminal(repr(collection))} with {model_name}",
                    file=sys.stderr,
                )
                turn = TurnSettings(params, settings.generation.system_prompt, collection, keep_passages=keep_passages)
                _read_first(chat, first, turn)
                conversations: dict[str, str] = {}  # the set's name for a conversation: the store's id for it
                for number, question in enumerate(questions, start=1):
                    result, asked_in = _ask(chat, question, turn, conversations.get(question.conversation or ""))
                    if question.conversation is not None:
                        conversations[question.conversation] = asked_in
                    results.append(result)
                    print(_progress_line(number, len(questions), result), flush=True)
            except KeyboardInterrupt:
                print(f"\nStopped after {len(results)} of {len(questions)} questions.", file=sys.stderr)
                _finish(AnswerReport(tuple(results)), collection, output)
                return EXIT_INTERRUPTED
            finally:
                store.close()
    finally:
        services.close()
    _finish(AnswerReport(tuple(results)), collection, output)
    return EXIT_OK


def chosen_questions(
    read: Callable[[Path], list[T]], questions_path: Path, part: str | None, limit: int | None, output: Path | None
) -> list[T]:
    """The questions an eval asks: read with ``read``, the ``part`` its split file names, the first ``limit``; and
    ``output`` checked, all before anything is loaded."""
    if limit is not None and limit < 1:
        raise HearthError("--limit must be 1 or more.", "Pass how many questions to ask, or leave it out for all.")
    questions = read(questions_path)
    if part is not None:
        questions = split_part(questions, questions_path, part)
    if output is not None:
        check_writable(output)
    return questions[:limit]


def write_report(output: Path, document: dict[str, object]) -> None:
    """An eval's per-question results as JSON, or why they could not be written."""
    try:
        output.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise HearthError(
            f"Cannot write {output}: {exc.strerror or exc}.", "Choose a folder you can write to."
        ) from None
    print(f"Per-question results written to {for_terminal(str(output))}", file=sys.stderr)


def split_file(questions_path: Path) -> Path:
    """Where a question set's split is kept: ``QA.split.json`` beside ``QA.jsonl``."""
    return questions_path.with_name(f"{questions_path.stem}.split.json")


def split_part(questions: Sequence[T], questions_path: Path, part: str) -> list[T]:
    """The questions on the lines that ``part`` of the set's split file lists (line numbers from 1)."""
    path = split_file(questions_path)
    try:
        split = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HearthError(
            f"{questions_path.name} has no split file, so it has no part called {part!r}.",
            f'Write {path.name} beside it: {{"tuning": [line numbers], "held-out": [line numbers]}}, or leave '
            "out --part.",
        ) from None
    except (OSError, ValueError) as exc:
        raise HearthError(f"{path} cannot be read ({exc}).", "Fix the file, or leave out --part.") from None
    parts = {k: v for k, v in split.items() if isinstance(v, list)} if isinstance(split, dict) else {}
    lines = parts.get(part)
    if lines is None:
        raise HearthError(
            f"{path.name} has no part called {part!r}.", f"Pick one of: {', '.join(sorted(parts)) or 'none'}."
        )
    bad = [n for n in lines if not isinstance(n, int) or not 1 <= n <= len(questions)]
    if bad:
        raise HearthError(
            f"{path.name} names lines that {questions_path.name} does not have: {bad[:5]}.",
            f"Use line numbers from 1 to {len(questions)}.",
        )
    return [questions[n - 1] for n in lines]


def _load(services: Services, passages: Path | None) -> None:
    """Load the model; with ``passages``, the kept passages' caches are also kept there on disk (up to
    ``EVAL_PASSAGES_MB``), so that none read is forgotten before the questions end, as the memory's cap alone would
    (about 75 passages of the default model)."""
    from app.cli.commands import load_model
    from backends.base import SavedCaches

    if passages is None:
        load_model(services)
        return
    saved = SavedCaches("", 0, str(passages), EVAL_PASSAGES_MB << 20, services.settings.backend.passage_cache_type)
    for step in services.runtime.load(replace(services.control.initial, saved_caches=saved)):
        print(f"[{step.fraction:4.0%}] {step.message}", file=sys.stderr)


def _read_first(chat: ChatService, questions: Sequence[AnswerQuestion], turn: TurnSettings) -> None:
    """Ask ``questions`` for one token each, unscored: their passages are read, and kept."""
    if not questions:
        return
    print(f"Reading the passages of {len(questions)} other questions first", file=sys.stderr)
    one_token = replace(turn, params=replace(turn.params, max_new_tokens=1))
    for number, question in enumerate(questions, start=1):
        _ask(chat, question, one_token)
        print(f"  read {number}/{len(questions)}", file=sys.stderr, flush=True)


def _ask(
    chat: ChatService, question: AnswerQuestion, turn: TurnSettings, conversation_id: str | None = None
) -> tuple[AnswerResult, str]:
    """The answer to ``question`` (in the conversation ``conversation_id``, or a new one) and its conversation."""
    started = time.perf_counter()
    head: TurnStarted | None = None
    parts: list[str] = []
    usage: Usage | None = None
    reason = "stop"
    saved: str | None = None
    for event in chat.send(conversation_id, question.question, turn):
        if isinstance(event, TurnStarted):
            head = event
        elif isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, Usage):
            usage = event
        elif isinstance(event, Finished):
            reason = event.reason
        elif isinstance(event, TurnSaved):
            saved = event.message.content  # what the user is left with: citations checked against the passages
    seconds = time.perf_counter() - started
    sources = head.sources if head else ()
    written = "".join(parts)
    answer = saved if saved is not None else written
    result = AnswerResult(
        question=question,
        answer=answer,
        score=score_answer(question, answer, [s.text for s in sources], [s.number for s in sources]),
        passages=len(sources),
        prompt_tokens=usage.prompt_tokens if usage else (head.prompt_tokens if head else 0),
        completion_tokens=usage.completion_tokens if usage else 0,
        seconds=seconds,
        finish_reason=reason,
        sources=sources,
        written=written if answer != written else None,
        joined_tokens=usage.joined_tokens if usage else 0,
    )
    return result, head.conversation_id if head else (conversation_id or "")


def _progress_line(number: int, total: int, result: AnswerResult) -> str:
    verdict = "right" if result.score.correct else "WRONG"
    cited = "cited" if result.score.cited else "no cite"
    missed = "" if result.score.answer_in_passages else " · not in passages"
    question = for_terminal(shorten(result.question.question, SHOWN_CHARS))
    return f"[{number}/{total}] {verdict:5} · {cited:7} · {result.seconds:5.1f} s{missed} · {question}"


def _finish(report: AnswerReport, collection: str, output: Path | None) -> None:
    for line in summary_lines(report, collection):
        print(line)
    if output is not None:
        document = {
            "collection": collection,
            "questions": len(report.results),
            "accuracy": report.accuracy,
            "citation_share": report.citation_share,
            "answerable_share": report.answerable_share,
            "cited_right_share": report.cited_right_share,
            **_turn_figures(report),
            "results": [result_record(r) for r in report.results],
        }
        write_report(output, document)


def _turn_figures(report: AnswerReport) -> dict[str, object]:
    """First questions and follow-ups apart, where the set has conversations."""
    later = report.turns(later=True)
    if not later.results:
        return {}
    figures: dict[str, object] = {}
    for name, part in (("first_turns", report.turns(later=False)), ("later_turns", later)):
        figures[name] = {
            "questions": len(part.results),
            "correct": part.correct,
            "accuracy": part.accuracy,
            "answerable": part.answerable,
            "median_completion_tokens": part.median_completion_tokens,
        }
    return figures


def _turn_lines(report: AnswerReport) -> list[str]:
    later = report.turns(later=True)
    if not later.results:
        return []
    first = report.turns(later=False)
    return [
        f"first questions {first.correct}/{len(first.results)} right, median {first.median_completion_tokens:.0f} "
        f"tokens an answer   follow-ups {later.correct}/{len(later.results)} right, median "
        f"{later.median_completion_tokens:.0f} tokens (their passages held the answer for "
        f"{later.answerable}/{len(later.results)})"
    ]


def summary_lines(report: AnswerReport, collection: str) -> list[str]:
    n = len(report.results)
    if not n:
        return ["No question was answered."]
    return [
        f"{n} questions, collection {for_terminal(repr(collection))}",
        f"accuracy {report.accuracy:.3f} ({report.correct}/{n} right)   "
        f"cited inline {report.citation_share:.3f} ({report.cited}/{n})",
        f"the passages given held the answer for {report.answerable}/{n}   "
        f"a cited passage held it for {report.cited_right}/{n} ({report.cited_right_share:.3f})   "
        f"{report.mean_seconds:.1f} s per question",
        f"as the model wrote them, before the citation check: a cited passage held it for "
        f"{report.written_cited_right}/{n}",
        *_turn_lines(report),
    ]


def check_writable(output: Path) -> None:
    folder = output.expanduser().parent
    if not folder.is_dir():
        raise HearthError(f"The folder for --output does not exist: {folder}.", "Create it, or choose another path.")
    if output.is_dir():
        raise HearthError(f"--output {output} is a folder.", "Give a file name, like results.json.")


def with_model(settings: Settings, reference: str) -> Settings:
    """``settings`` answering with the model ``reference`` names (a GGUF path, or an id or file name from `hearth
    models list`)."""
    return settings.model_copy(
        update={"model": settings.model.model_copy(update={"path": _model_path(settings, reference)})}
    )


def _model_path(settings: Settings, reference: str) -> Path:
    """A file on disk is used as it is; anything else is looked up in `hearth models list`."""
    from app.services.catalog.models import open_model_store

    candidate = Path(reference).expanduser()
    if candidate.is_file():
        return candidate
    store = open_model_store(ensure_data_dir(resolve_data_paths(settings.home)))
    try:
        return store.find(reference).path
    finally:
        store.close()
