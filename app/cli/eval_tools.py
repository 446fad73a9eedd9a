"""`hearth eval tools`: how well a model calls functions, through the path the API takes for
``tool_choice: "auto"``: the functions offered with the request, rendered by the model's template where it knows
tools (``--form native``) or written into the system message (``--form written``), or native with a line on when to
call (``--form guided``); each call held to its schema by
the lazy grammar, and the calls read out of the answer as the API reads them (``backends.tool_calls.calls_in``).
Greedy, so a rerun gives the same figures. Scoring is :mod:`app.tools.call_eval`'s.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from app.cli.eval import EXIT_INTERRUPTED, EXIT_OK, chosen_questions, with_model, write_report
from app.services.serving.model_handles import Lease
from app.settings import Settings
from app.terminal_text import for_terminal
from app.tools.call_eval import RIGHT, Outcome, ToolQuestion, read_tool_questions, report, score_calls
from app.tools.relevance import fitting_tools
from backends.base import CancelToken, ChatMessage, Finished, GenerationParams, TextDelta, ToolCall
from backends.tool_calls import CALL_GUIDANCE, calls_grammar, calls_in, generic_messages
from models.shared.wording import shorten
from rag.retrieval.embeddings import Embedder

Form = Literal["native", "written", "guided"]
DEFAULT_MAX_TOKENS = 160
SHOWN_CHARS = 60


@dataclasses.dataclass(frozen=True)
class Asked:
    question: ToolQuestion
    text: str  # what the model wrote besides its calls
    calls: tuple[ToolCall, ...]
    outcome: Outcome
    detail: str
    seconds: float
    finish_reason: str
    offered: tuple[str, ...] | None = None  # the functions offered, when only those that fit were


def run_eval_tools(
    settings: Settings,
    questions_path: Path,
    model: str | None,
    form: Form,
    limit: int | None,
    part: str | None,
    output: Path | None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    fitting: bool = False,
) -> int:
    """``fitting``: offer each question only the functions that fit it, as the page and the terminal offer tools
    (``tools.fit_threshold``); a question left with none is asked without tools."""
    from app.cli.commands import load_model
    from app.services.container import build_services, measuring

    questions = chosen_questions(read_tool_questions, questions_path, part, limit, output)
    if model is not None:
        settings = with_model(settings, model)
    services = build_services(measuring(settings))
    threshold = settings.tools.fit_threshold if fitting else None
    results: list[Asked] = []
    model_name = "?"
    try:
        load_model(services)
        model_name = services.runtime.model.display_name if services.runtime.model else "?"
        params = dataclasses.replace(services.generation_params(), temperature=0.0, max_new_tokens=max_tokens, seed=0)
        only = f", only those that fit (at least {threshold:g})" if threshold is not None else ""
        print(f"Asking {len(questions)} tool questions of {model_name}, tools {form}{only}", file=sys.stderr)
        gate = _gate(services.documents.get().embedder, threshold) if threshold is not None else None
        with services.runtime.lease() as engine:
            try:
                for number, question in enumerate(questions, start=1):
                    offered = gate(question) if gate is not None else question
                    result = _ask(engine, offered, params, settings.generation.system_prompt, form)
                    if offered is not question:
                        names = tuple(f.name for f in offered.functions)
                        result = dataclasses.replace(result, question=question, offered=names)
                    results.append(result)
                    print(_progress_line(number, len(questions), result), flush=True)
            except KeyboardInterrupt:
                print(f"\nStopped after {len(results)} of {len(questions)} questions.", file=sys.stderr)
                _finish(results, model_name, form, part, output, threshold)
                return EXIT_INTERRUPTED
    finally:
        services.close()
    _finish(results, model_name, form, part, output, threshold)
    return EXIT_OK


def _gate(embedder: Embedder, threshold: float) -> Callable[[ToolQuestion], ToolQuestion]:
    """The question with only the functions that fit it, as the page offers tools."""

    def offered(question: ToolQuestion) -> ToolQuestion:
        fits = fitting_tools(embedder, question.question, question.functions, threshold)
        return dataclasses.replace(question, functions=fits)

    return offered


def offered_request(
    question: ToolQuestion, params: GenerationParams, system: str, form: Form
) -> tuple[list[ChatMessage], GenerationParams]:
    """The messages and parameters the API would send the engine for this question with ``tool_choice: auto``;
    with ``written``, the tools in the system message whatever the template knows; with ``guided``, as native with
    :data:`CALL_GUIDANCE` after the system prompt."""
    if form == "guided":
        system = f"{system}\n\n{CALL_GUIDANCE}"
    messages = [ChatMessage("system", system), ChatMessage("user", question.question)]
    if not question.functions:  # none fits: asked as a plain question
        return messages, dataclasses.replace(params, tools=(), grammar=None)
    grammar = calls_grammar(question.functions, None, False, True)
    if form == "written":
        return generic_messages(messages, question.functions), dataclasses.replace(params, grammar=grammar)
    return messages, dataclasses.replace(params, tools=question.functions, grammar=grammar)


def _ask(engine: Lease, question: ToolQuestion, params: GenerationParams, system: str, form: Form) -> Asked:
    messages, wanted = offered_request(question, params, system, form)
    started = time.perf_counter()
    said: list[str] = []
    calls: list[ToolCall] = []
    reason = "stop"
    for item in calls_in(engine.stream_chat(messages, wanted, CancelToken())):
        if isinstance(item, ToolCall):
            calls.append(item)
        elif isinstance(item, TextDelta):
            said.append(item.text)
        elif isinstance(item, Finished):
            reason = item.reason
    scored = score_calls(question, calls)
    seconds = time.perf_counter() - started
    return Asked(question, "".join(said), tuple(calls), scored.outcome, scored.detail, seconds, reason)


def _progress_line(number: int, total: int, result: Asked) -> str:
    verdict = "right" if result.outcome in RIGHT else "WRONG"
    detail = f" ({result.detail})" if result.detail else ""
    question = for_terminal(shorten(result.question.question, SHOWN_CHARS))
    outcome = for_terminal(f"{result.outcome}{detail}")
    return f"[{number}/{total}] {verdict:5} · {outcome} · {result.seconds:4.1f} s · {question}"


def summary_lines(results: Sequence[Asked]) -> list[str]:
    if not results:
        return ["No question was asked."]
    calls = [r for r in results if r.question.expected is not None]
    nones = [r for r in results if r.question.expected is None]
    whole = report([r.outcome for r in results])
    right_calls = sum(r.outcome == "right call" for r in calls)
    right_nones = sum(r.outcome == "right abstention" for r in nones)
    return [
        f"{whole.right}/{whole.total} right ({whole.right / whole.total:.0%}): "
        f"{right_calls}/{len(calls)} calls right, {right_nones}/{len(nones)} rightly made no call",
        "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(whole.counts.items())),
        f"invalid calls: {whole.counts.get('invalid call', 0)}   "
        f"{sum(r.seconds for r in results) / len(results):.1f} s per question",
    ]


def _finish(
    results: Sequence[Asked], model: str, form: Form, part: str | None, output: Path | None, threshold: float | None
) -> None:
    for line in summary_lines(results):
        print(line)
    if output is None:
        return
    whole = report([r.outcome for r in results])
    document: dict[str, object] = {
        "model": model,
        "form": form,
        "part": part or "all",
        "fit_threshold": threshold,  # None: every function offered
        "questions": len(results),
        "right": whole.right,
        "right_share": whole.right / whole.total if whole.total else 0.0,
        "right_calls": whole.counts.get("right call", 0),
        "needed_calls": sum(r.question.expected is not None for r in results),
        "right_abstentions": whole.counts.get("right abstention", 0),
        "invalid_calls": whole.counts.get("invalid call", 0),
        "outcomes": whole.counts,
        "results": [
            {
                "question": r.question.question,
                "outcome": r.outcome,
                "detail": r.detail,
                "calls": [{"name": c.name, "arguments": c.arguments} for c in r.calls],
                "text": r.text,
                "finish_reason": r.finish_reason,
                **({"offered": list(r.offered)} if r.offered is not None else {}),
                "seconds": round(r.seconds, 2),
            }
            for r in results
        ],
    }
    write_report(output, document)
