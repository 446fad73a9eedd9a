"""Retrieval quality on a question set: hit@1, hit@k and mean reciprocal rank.

A question set is JSON Lines: ``{"question": ..., "gold_file": ..., "gold_page": optional}``. A retrieved passage
matches when its file name equals ``gold_file`` (the name, not the folder) and, if ``gold_page`` is given, its
page does too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.errors import HearthError


class QuestionSetError(HearthError):
    """The question file cannot be used."""


@dataclass(frozen=True)
class Question:
    question: str
    gold_file: str
    gold_page: int | None = None


@dataclass(frozen=True)
class Retrieved:
    file_name: str
    page: int | None


@dataclass(frozen=True)
class QuestionResult:
    question: Question
    rank: int | None  # 1-based rank of the first matching passage, None if not retrieved
    retrieved: tuple[Retrieved, ...]


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


def _share(results: Sequence[QuestionResult], predicate: Callable[[QuestionResult], bool]) -> float:
    return sum(1 for r in results if predicate(r)) / len(results) if results else 0.0


def read_questions(path: Path) -> list[Question]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise QuestionSetError(f"Question file not found: {path}.", "Check the path.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionSetError(f"Cannot read {path}: {exc}.", "Save it as UTF-8 JSON Lines.") from exc
    questions = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            question = Question(str(item["question"]), str(item["gold_file"]), _page(item.get("gold_page")))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise QuestionSetError(
                f"{path.name} line {number} is not a valid question ({type(exc).__name__}: {exc}).",
                'Each line must be JSON like {"question": "...", "gold_file": "name.pdf", "gold_page": 3}.',
            ) from None
        if not question.question.strip():
            raise QuestionSetError(f"{path.name} line {number} has an empty question.", "Fill it in or remove it.")
        questions.append(question)
    if not questions:
        raise QuestionSetError(f"{path.name} has no questions.", "Add one JSON object per line.")
    return questions


def _page(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError("gold_page must be a whole number")
    return int(value)


def score(question: Question, retrieved: Sequence[Retrieved]) -> QuestionResult:
    for rank, item in enumerate(retrieved, start=1):
        if item.file_name == question.gold_file and (question.gold_page is None or item.page == question.gold_page):
            return QuestionResult(question, rank, tuple(retrieved))
    return QuestionResult(question, None, tuple(retrieved))


def evaluate(
    questions: Sequence[Question], search: Callable[[str], Sequence[Retrieved]], top_k: int
) -> EvaluationReport:
    return EvaluationReport(tuple(score(q, list(search(q.question))[:top_k]) for q in questions), top_k)
