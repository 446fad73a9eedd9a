"""Scoring a model's tool calls on a question set (``hearth eval tools``), in the style of the
Berkeley function-calling benchmark's simple and irrelevance parts: each question offers one or a few functions
and either needs one call with the right arguments or needs none.

A question set is JSONL, one question a line::

    {"question": "...", "functions": [{"name": ..., "description": ..., "parameters": {JSON Schema}}],
     "expected": {"name": "get_weather", "arguments": {"city": ["Bergen", "Bergen, Norway"]}}}

``expected`` is null when no call is right. Each listed argument must be one of its values (text compared without
case, outer spaces or end punctuation; numbers by value; ``null`` in the list lets it be left out); arguments not
listed may be anything the schema allows. Pure: reading, checking and counting; running the model is the
command's (``app/cli/eval_tools.py``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from backends.base import ToolCall, ToolSpec
from models.shared.errors import HearthError

Outcome = Literal["right call", "wrong call", "missed", "right abstention", "needless call", "invalid call"]
RIGHT: tuple[Outcome, ...] = ("right call", "right abstention")


@dataclass(frozen=True)
class ExpectedCall:
    name: str
    arguments: dict[str, tuple[Any, ...]]  # each argument checked, with the values that are right for it


@dataclass(frozen=True)
class ToolQuestion:
    question: str
    functions: tuple[ToolSpec, ...]
    expected: ExpectedCall | None  # None: the right answer makes no call


@dataclass(frozen=True)
class Scored:
    outcome: Outcome
    detail: str  # what was wrong, in words ("" when right)


def read_tool_questions(path: Path) -> list[ToolQuestion]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise HearthError(f"{path} cannot be read ({exc}).", "Give the path of a JSONL tool question set.") from None
    questions = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            questions.append(_question(json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise HearthError(
                f"Line {number} of {path.name} is not a tool question ({exc}).",
                'Each line needs "question", "functions" (name, description, parameters) and "expected" (null, or '
                '"name" and "arguments").',
            ) from None
    if not questions:
        raise HearthError(f"{path.name} holds no questions.", "Give a JSONL file with one question a line.")
    return questions


def _question(raw: dict[str, Any]) -> ToolQuestion:
    question = raw["question"]
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the question is empty")
    functions = tuple(
        ToolSpec(f["name"], f.get("description", ""), json.dumps(f.get("parameters") or {"type": "object"}))
        for f in raw["functions"]
    )
    if not functions:
        raise ValueError("no functions are offered")
    expected = raw["expected"]
    if expected is None:
        return ToolQuestion(question, functions, None)
    name = expected["name"]
    if name not in {f.name for f in functions}:
        raise ValueError(f"the expected function {name!r} is not offered")
    arguments = {key: tuple(values) for key, values in expected["arguments"].items()}
    if any(not values for values in arguments.values()):
        raise ValueError("an expected argument lists no values")
    return ToolQuestion(question, functions, ExpectedCall(name, arguments))


def score_calls(question: ToolQuestion, calls: Sequence[ToolCall]) -> Scored:
    """How the calls the model made answer ``question``."""
    distinct = list({(c.name, c.arguments): c for c in calls}.values())
    for call in distinct:
        problem = invalid_reason(call, question.functions)
        if problem is not None:
            return Scored("invalid call", problem)
    expected = question.expected
    if expected is None:
        if distinct:
            return Scored("needless call", f"called {distinct[0].name} where no call was needed")
        return Scored("right abstention", "")
    if not distinct:
        return Scored("missed", "answered without a call")
    if len(distinct) > 1:
        return Scored("wrong call", f"{len(distinct)} different calls where one was needed")
    call = distinct[0]
    if call.name != expected.name:
        return Scored("wrong call", f"called {call.name}, not {expected.name}")
    arguments = json.loads(call.arguments or "{}")
    for key, values in expected.arguments.items():
        if not any(_same(arguments.get(key), value) for value in values):
            return Scored("wrong call", f"{key} was {json.dumps(arguments.get(key))}")
    return Scored("right call", "")


def invalid_reason(call: ToolCall, functions: Sequence[ToolSpec]) -> str | None:
    """Why ``call`` is not a valid call of one of ``functions`` (its name, JSON or schema), or None."""
    import jsonschema

    spec = next((f for f in functions if f.name == call.name), None)
    if spec is None:
        return f"called {call.name!r}, which is not offered"
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return "its arguments are not JSON"
    try:
        jsonschema.validate(arguments, json.loads(spec.parameters))
    except jsonschema.ValidationError as exc:
        return f"its arguments do not fit the schema: {exc.message}"
    return None


def _same(given: Any, wanted: Any) -> bool:
    if wanted is None:
        return given is None
    if isinstance(wanted, bool) or isinstance(given, bool):
        return given is wanted
    if isinstance(wanted, int | float):
        return isinstance(given, int | float) and math.isclose(given, wanted, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(wanted, str):
        return isinstance(given, str) and _plain(given) == _plain(wanted)
    return bool(given == wanted)


def _plain(text: str) -> str:
    return " ".join(text.casefold().split()).strip(" .!?,;:'\"")


@dataclass(frozen=True)
class ToolReport:
    counts: dict[str, int]
    total: int

    @property
    def right(self) -> int:
        return sum(self.counts.get(o, 0) for o in RIGHT)

    def share(self, *outcomes: Outcome) -> float:
        return sum(self.counts.get(o, 0) for o in outcomes) / self.total if self.total else 0.0


def report(outcomes: Sequence[Outcome]) -> ToolReport:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return ToolReport(counts, len(outcomes))
