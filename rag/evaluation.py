"""Retrieval quality on a question set: hit@1, hit@k and mean reciprocal rank.

A question set is JSON Lines, one object per line::

    {"question": "...", "gold_file": "bashref.pdf", "gold_page": 42}
    {"question": "...", "gold_file": "ubuntu.csv", "gold_text": "Dapper Drake"}

A retrieved passage matches when its file name equals ``gold_file`` (the name, not the folder), its page equals
``gold_page`` when one is given (the PDF's physical page, counted from 1) and it contains ``gold_text`` when one is
given (compared on letters and digits only, ignoring case, so spacing and punctuation do not matter). The question's
rank is that of the first matching passage.

An answer set's lines (``{"question", "expected", "source"}``, see ``rag/answer_eval.py``) read as questions too:
``source`` is the gold file, and ``expected`` is kept so the caller can tell whether the passages retrieved hold
the answer (every expected string in them), the recall at the passage budget.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from models.shared.errors import HearthError

FORMAT_HINT = (
    'Each line must be one JSON object: {"question": "...", "gold_file": "name.pdf"}, optionally with '
    '"gold_page" (a page number from 1) and "gold_text" (words the right passage contains).'
)
MAX_LINES_NAMED = 5


class QuestionSetError(HearthError):
    """The question file cannot be used."""


@dataclass(frozen=True)
class Question:
    question: str
    gold_file: str
    gold_page: int | None = None
    gold_text: str | None = None
    expected: tuple[tuple[str, ...], ...] = ()  # an answer set's expected strings (each a tuple of alternatives)


@dataclass(frozen=True)
class Retrieved:
    file_name: str
    page: int | None
    text: str = ""


@dataclass(frozen=True)
class QuestionResult:
    question: Question
    rank: int | None  # 1-based rank of the first matching passage, None if not retrieved
    retrieved: tuple[Retrieved, ...]
    latency_ms: float = 0.0


@dataclass(frozen=True)
class EvaluationReport:
    results: tuple[QuestionResult, ...]
    top_k: int

    @property
    def hit_at_1(self) -> float:
        return _share(self.results, lambda r: r.rank == 1)

    @property
    def hit_at_k(self) -> float:
        return _share(self.results, lambda r: r.rank is not None)

    @property
    def mrr(self) -> float:
        if not self.results:
            return 0.0
        return sum(1.0 / r.rank for r in self.results if r.rank) / len(self.results)

    def latency_percentile_ms(self, share: float) -> float:
        """The search time below which ``share`` of the questions were answered (nearest rank)."""
        ordered = sorted(r.latency_ms for r in self.results)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def _share(results: Sequence[QuestionResult], predicate: Callable[[QuestionResult], bool]) -> float:
    return sum(1 for r in results if predicate(r)) / len(results) if results else 0.0


@dataclass(frozen=True)
class LineProblem:
    line: int
    problem: str


def question_file_lines(path: Path, error: type[HearthError] = QuestionSetError) -> list[str]:
    """The lines of a JSON Lines question file; a file that cannot be read raises ``error`` saying why."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise error(f"Question file not found: {path}.", "Check the path.") from None
    except IsADirectoryError:
        raise error(f"{path} is a folder, not a question file.", "Name a .jsonl file.") from None
    except UnicodeDecodeError:
        raise error(f"{path.name} is not UTF-8 text.", "Save it as UTF-8 JSON Lines.") from None
    except OSError as exc:
        raise error(f"Cannot read {path}: {exc.strerror or exc}.", "Check its permissions.") from exc


def read_questions(path: Path) -> list[Question]:
    """The questions in ``path``; every line that cannot be used is named at once, with what is wrong."""
    lines = question_file_lines(path)
    questions, problems = parse_questions(lines)
    if problems:
        raise QuestionSetError(describe_problems(path.name, problems), FORMAT_HINT)
    if not questions:
        raise QuestionSetError(f"{path.name} has no questions.", FORMAT_HINT)
    return questions


def parse_questions(lines: Sequence[str]) -> tuple[list[Question], list[LineProblem]]:
    questions: list[Question] = []
    problems: list[LineProblem] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(LineProblem(number, f"is not valid JSON ({exc.msg} at column {exc.colno})"))
            continue
        parsed = parse_question(item)
        if isinstance(parsed, Question):
            questions.append(parsed)
        else:
            problems.append(LineProblem(number, parsed))
    return questions, problems


def parse_question(item: object) -> Question | str:
    """The question in one decoded line, or what is wrong with it."""
    if not isinstance(item, dict):
        return f"is a JSON {type(item).__name__}, not an object"
    question = item.get("question")
    if not isinstance(question, str) or not question.strip():
        return _missing_text(item, "question")
    expected = _expected(item.get("expected")) if "gold_file" not in item else ()  # an answer set's line
    gold_file = item.get("gold_file", item.get("source") if expected else None)
    if not isinstance(gold_file, str) or not gold_file.strip():
        return _missing_text(item, "gold_file")
    page = _page(item.get("gold_page"))
    if isinstance(page, str):
        return page
    gold_text = item.get("gold_text")
    if gold_text is not None and (not isinstance(gold_text, str) or not _letters_and_digits(gold_text)):
        return '"gold_text" must be words the right passage contains'
    return Question(question.strip(), _file_name(gold_file), page, gold_text, expected)


def _expected(value: object) -> tuple[tuple[str, ...], ...]:
    """An answer set's "expected" list as tuples of alternatives; empty for anything else."""
    if not isinstance(value, list):
        return ()
    items = [tuple(entry) if isinstance(entry, list) else (entry,) for entry in value]
    return tuple(items) if all(all(isinstance(a, str) for a in item) and item for item in items) else ()


def _missing_text(item: dict[object, object], key: str) -> str:
    if key not in item:
        found = ", ".join(sorted(str(k) for k in item)) or "nothing"
        return f'has no "{key}" (it has: {found})'
    return f'has an empty "{key}"' if isinstance(item[key], str) else f'has a "{key}" that is not text'


def _file_name(value: str) -> str:
    """Passages are matched by file name, so a path given here is reduced to its name."""
    return Path(value.strip().replace("\\", "/")).name


def _page(value: object) -> int | str | None:
    if value is None:
        return None
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if number is None or number < 1:
        return f'has "gold_page": {json.dumps(value)}; it must be a page number from 1'
    return number


def describe_problems(file_name: str, problems: Sequence[LineProblem]) -> str:
    shown = "; ".join(f"line {p.line} {p.problem}" for p in problems[:MAX_LINES_NAMED])
    more = len(problems) - MAX_LINES_NAMED
    rest = f"; and {more} more line{'s' if more != 1 else ''}" if more > 0 else ""
    count = f"{len(problems)} line{'s' if len(problems) != 1 else ''}"
    return f"{file_name}: {count} cannot be used: {shown}{rest}."


def unknown_gold_files(questions: Sequence[Question], file_names: set[str]) -> dict[str, list[int]]:
    """Gold files that are not in the collection, each with the (1-based) positions of the questions naming it:
    those questions can never be answered, which usually means a misspelt name or a file not yet added."""
    missing: dict[str, list[int]] = {}
    for position, question in enumerate(questions, start=1):
        if question.gold_file not in file_names:
            missing.setdefault(question.gold_file, []).append(position)
    return missing


def _letters_and_digits(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.casefold())


def matches(question: Question, item: Retrieved) -> bool:
    if item.file_name != question.gold_file:
        return False
    if question.gold_page is not None and item.page != question.gold_page:
        return False
    return question.gold_text is None or _letters_and_digits(question.gold_text) in _letters_and_digits(item.text)


def score(question: Question, retrieved: Sequence[Retrieved], latency_ms: float = 0.0) -> QuestionResult:
    for rank, item in enumerate(retrieved, start=1):
        if matches(question, item):
            return QuestionResult(question, rank, tuple(retrieved), latency_ms)
    return QuestionResult(question, None, tuple(retrieved), latency_ms)


def evaluate(
    questions: Sequence[Question],
    search: Callable[[str], Sequence[Retrieved]],
    top_k: int,
    clock: Callable[[], float] = time.perf_counter,
) -> EvaluationReport:
    results = []
    for question in questions:
        started = clock()
        retrieved = list(search(question.question))[:top_k]
        results.append(score(question, retrieved, (clock() - started) * 1000))
    return EvaluationReport(tuple(results), top_k)
