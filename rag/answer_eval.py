"""Answer quality on a question set: does the answer hold the expected facts, and does it cite a passage inline.

A question set is JSON Lines, one question per line::

    {"question": "What is the codename of Ubuntu 6.06 LTS?", "expected": ["Dapper Drake"]}
    {"question": "When was Debian 11 released?", "expected": [["2021-08-14", "August 14, 2021"]]}

``expected`` is a list; each item is a string, or a list of alternatives of which any one will do. Other keys
(``id``, ``source``, …) are kept for the reader and ignored here, but for ``conversation``: the questions that name
the same conversation are asked in one conversation, in the order of their lines (a follow-up's answer is scored
like any other, and reported apart from first questions).

The rule, exactly: an answer is right when every item of ``expected`` appears in it. Before comparing, the answer
and the expected strings are NFKC-normalised, case-folded and their runs of whitespace collapsed to one space;
inline citation markers such as ``[1]`` or ``[2, 3]`` are removed from the answer, so a marker's digits never
count as a number in the answer. An expected string must stand on its own: the character just before it and
the one just after it in the answer may not be letters or digits ("14" does not match "140", nor "sort"
"sorted"). An answer cites inline when it holds a marker whose number is one of the passages it was given and
says something besides its markers (a bare "[1]" cites nothing).
"""

from __future__ import annotations

import json
import re
import statistics
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from models.shared.errors import HearthError
from rag.evaluation import question_file_lines
from rag.prompt import CITATION_MARKER, Source, marker_numbers

_SPACE = re.compile(r"\s+")
EXAMPLE_LINE = '{"question": "What is the codename of Ubuntu 6.06 LTS?", "expected": ["Dapper Drake"]}'


class AnswerSetError(HearthError):
    """The answer question set cannot be used."""


@dataclass(frozen=True)
class AnswerQuestion:
    question: str
    expected: tuple[tuple[str, ...], ...]  # every item must appear; any one alternative of an item will do
    line: int
    conversation: str | None = None  # questions naming the same conversation are asked in one, in line order
    turn: int = 1  # its place in its conversation: 1 for a first question


@dataclass(frozen=True)
class AnswerScore:
    correct: bool
    cited: bool  # at least one marker names a passage that was given, beside some text of the answer
    stray_citations: int  # markers naming a passage that was not given
    answer_in_passages: bool  # the passages given held every expected item (else retrieval missed it)
    cited_holds_answer: bool = False  # a passage the answer cites holds every expected item (it cites the right one)


@dataclass(frozen=True)
class AnswerResult:
    question: AnswerQuestion
    answer: str
    score: AnswerScore
    passages: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str
    sources: tuple[Source, ...] = ()  # the passages given, numbered as the answer cites them
    written: str | None = None  # the answer as the model wrote it, where checking its citations changed it
    joined_tokens: int = 0  # passage tokens joined from kept caches instead of read (`--keep-passages`)

    @property
    def written_cites_right(self) -> bool:
        """Whether a passage the model itself cited holds the answer (before its citations were checked)."""
        if self.written is None:
            return self.score.cited_holds_answer
        texts = [s.text for s in self.sources]
        return score_answer(self.question, self.written, texts, [s.number for s in self.sources]).cited_holds_answer


@dataclass(frozen=True)
class AnswerReport:
    results: tuple[AnswerResult, ...]

    @property
    def accuracy(self) -> float:
        return _share(self.results, lambda r: r.score.correct)

    @property
    def citation_share(self) -> float:
        return _share(self.results, lambda r: r.score.cited)

    @property
    def answerable_share(self) -> float:
        return _share(self.results, lambda r: r.score.answer_in_passages)

    @property
    def cited_right_share(self) -> float:
        return _share(self.results, lambda r: r.score.cited_holds_answer)

    @property
    def cited_right(self) -> int:
        return sum(1 for r in self.results if r.score.cited_holds_answer)

    @property
    def written_cited_right(self) -> int:
        """:attr:`cited_right` for the answers as the model wrote them, before their citations were checked."""
        return sum(1 for r in self.results if r.written_cites_right)

    @property
    def correct(self) -> int:
        return sum(1 for r in self.results if r.score.correct)

    @property
    def cited(self) -> int:
        return sum(1 for r in self.results if r.score.cited)

    @property
    def answerable(self) -> int:
        return sum(1 for r in self.results if r.score.answer_in_passages)

    @property
    def mean_seconds(self) -> float:
        return sum(r.seconds for r in self.results) / len(self.results) if self.results else 0.0

    @property
    def median_completion_tokens(self) -> float:
        """How long the answers ran, in tokens: a conversation's later answers shrinking shows here first."""
        return float(statistics.median(r.completion_tokens for r in self.results)) if self.results else 0.0

    def turns(self, later: bool) -> AnswerReport:
        """The first questions of their conversations (and questions asked alone), or the follow-ups."""
        return AnswerReport(tuple(r for r in self.results if (r.question.turn > 1) == later))


def _share(results: Sequence[AnswerResult], test: Callable[[AnswerResult], bool]) -> float:
    return sum(1 for r in results if test(r)) / len(results) if results else 0.0


# --- reading a question set ----------------------------------------------------------------------------------


def read_answer_questions(path: Path) -> list[AnswerQuestion]:
    """Every question of ``path``; the first bad line stops with its number and what to change."""
    lines = question_file_lines(path, AnswerSetError)
    questions = [parse_line(line, number, path.name) for number, line in enumerate(lines, start=1) if line.strip()]
    if not questions:
        raise AnswerSetError(f"{path.name} has no questions.", f"Add one JSON object per line, like {EXAMPLE_LINE}")
    return numbered_turns(questions)


def numbered_turns(questions: Sequence[AnswerQuestion]) -> list[AnswerQuestion]:
    """``questions`` with each one's place in its conversation: the n-th to name a conversation is its turn n."""
    seen: dict[str, int] = {}
    numbered: list[AnswerQuestion] = []
    for question in questions:
        if question.conversation is None:
            numbered.append(replace(question, turn=1))
            continue
        seen[question.conversation] = seen.get(question.conversation, 0) + 1
        numbered.append(replace(question, turn=seen[question.conversation]))
    return numbered


def parse_line(line: str, number: int, file_name: str) -> AnswerQuestion:
    where = f"{file_name} line {number}"
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise AnswerSetError(
            f"{where} is not valid JSON ({exc.msg} at column {exc.colno}).",
            f"Write one JSON object per line, like {EXAMPLE_LINE}",
        ) from None
    if not isinstance(item, dict):
        raise AnswerSetError(f"{where} is not a JSON object.", f"Write it like {EXAMPLE_LINE}")
    question = item.get("question")
    if not isinstance(question, str) or not question.strip():
        raise AnswerSetError(f'{where} has no question (an empty or missing "question").', "Fill it in or remove it.")
    if "expected" not in item:
        raise AnswerSetError(
            f'{where} has no "expected" list.',
            'Add the strings a right answer must contain, like "expected": ["Dapper Drake"].',
        )
    conversation = item.get("conversation")
    if conversation is not None and (not isinstance(conversation, str) or not conversation.strip()):
        raise AnswerSetError(
            f'{where} has a "conversation" that is not a name.',
            'Name the conversation the question belongs to, like "conversation": "csv-1", or leave it out.',
        )
    return AnswerQuestion(question.strip(), _expected(item["expected"], where), number, conversation)


def _expected(value: object, where: str) -> tuple[tuple[str, ...], ...]:
    remedy = (
        '"expected" is a list of strings, each of which a right answer must contain; an item may be a list of '
        'alternatives: ["Dapper Drake"] or [["2022-04-21", "April 21, 2022"]].'
    )
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise AnswerSetError(f'{where} has an empty or malformed "expected".', remedy)
    items: list[tuple[str, ...]] = []
    for entry in value:
        alternatives = entry if isinstance(entry, list) else [entry]
        if not alternatives or not all(isinstance(a, str) and normalise(a) for a in alternatives):
            raise AnswerSetError(f"{where}: every expected item must be a non-empty string.", remedy)
        items.append(tuple(alternatives))
    return tuple(items)


# --- scoring ---------------------------------------------------------------------------------------------------


def normalise(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def without_markers(text: str) -> str:
    return CITATION_MARKER.sub(" ", text)


def contains(answer: str, wanted: str) -> bool:
    """``wanted`` appears in ``answer`` under the rule of this module (normalised, standing on its own)."""
    haystack, needle = normalise(without_markers(answer)), normalise(wanted)
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        before = haystack[start - 1] if start else " "
        after = haystack[end] if end < len(haystack) else " "
        if not before.isalnum() and not after.isalnum():
            return True
        start = haystack.find(needle, start + 1)
    return False


def holds_expected(text: str, expected: Sequence[Sequence[str]]) -> bool:
    return all(any(contains(text, alternative) for alternative in item) for item in expected)


def cited_numbers(answer: str) -> list[int]:
    """Every number named in the answer's citation markers, in order ("[1][3]", "[2, 4]")."""
    return [n for group in CITATION_MARKER.findall(answer) for n in marker_numbers(group)]


def score_answer(
    question: AnswerQuestion, answer: str, passage_texts: Sequence[str], passage_numbers: Sequence[int] = ()
) -> AnswerScore:
    """``passage_numbers``: the number each passage is cited by (1, 2, 3… when not given; a follow-up's passages
    are numbered on from the conversation's earlier ones)."""
    numbers = cited_numbers(answer)
    given = dict(zip(passage_numbers or range(1, len(passage_texts) + 1), passage_texts, strict=True))
    return AnswerScore(
        correct=holds_expected(answer, question.expected),
        cited=any(n in given for n in numbers) and any(c.isalnum() for c in without_markers(answer)),
        stray_citations=sum(1 for n in numbers if n not in given),
        answer_in_passages=holds_expected("\n".join(passage_texts), question.expected),
        cited_holds_answer=any(holds_expected(given[n], question.expected) for n in set(numbers) if n in given),
    )


def result_record(result: AnswerResult) -> dict[str, object]:
    """One question's result as JSON for ``--output``."""
    return {
        "line": result.question.line,
        "question": result.question.question,
        "conversation": result.question.conversation,
        "turn": result.question.turn,
        "expected": [list(item) for item in result.question.expected],
        "answer": result.answer,
        "correct": result.score.correct,
        "cited": result.score.cited,
        "stray_citations": result.score.stray_citations,
        "answer_in_passages": result.score.answer_in_passages,
        "passages": result.passages,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "joined_tokens": result.joined_tokens,
        "seconds": round(result.seconds, 2),
        "finish_reason": result.finish_reason,
        "cited_holds_answer": result.score.cited_holds_answer,
        "written": result.written,
        "sources": [
            {
                "number": s.number,
                "label": s.label,
                "file": Path(s.path).name,
                "page": s.page,
                "section": s.section,
                "holds_answer": holds_expected(s.text, result.question.expected),
                "text": s.text,  # as given to the model: what a rule tried later on the answers can read
            }
            for s in result.sources
        ],
    }
