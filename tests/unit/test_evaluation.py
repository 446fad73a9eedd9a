from pathlib import Path

import pytest

from rag.evaluation import Question, QuestionSetError, Retrieved, evaluate, read_questions, score


def test_scoring_and_metrics() -> None:
    questions = [
        Question("a", "one.pdf", gold_page=2),
        Question("b", "two.md"),
        Question("c", "three.txt"),
    ]
    answers = {
        "a": [Retrieved("one.pdf", 1), Retrieved("one.pdf", 2)],  # right file, wrong page first
        "b": [Retrieved("two.md", None)],
        "c": [Retrieved("other.txt", None)],
    }
    report = evaluate(questions, lambda q: answers[q], top_k=5)
    assert [r.rank for r in report.results] == [2, 1, None]
    assert report.hit_at_1 == pytest.approx(1 / 3)
    assert report.hit_at_k == pytest.approx(2 / 3)
    assert report.mrr == pytest.approx((1 / 2 + 1) / 3)


def test_only_the_top_k_count() -> None:
    result = evaluate([Question("q", "x.md")], lambda q: [Retrieved("y.md", None)] * 5 + [Retrieved("x.md", None)], 5)
    assert result.results[0].rank is None
    assert score(Question("q", "x.md"), [Retrieved("x.md", None)]).rank == 1


def test_question_files_are_read(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(
        '{"question": "q1", "gold_file": "a.pdf", "gold_page": 3}\n\n{"question": "q2", "gold_file": "b.md"}\n'
    )
    assert read_questions(path) == [Question("q1", "a.pdf", 3), Question("q2", "b.md", None)]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "q"}\n', "line 1 is not a valid question"),
        ('{"question": "q", "gold_file": "a"}\nnot json\n', "line 2 is not a valid question"),
        ('{"question": "q", "gold_file": "a", "gold_page": "three"}\n', "line 1"),
        ('{"question": "  ", "gold_file": "a"}\n', "empty question"),
        ("\n\n", "has no questions"),
    ],
)
def test_bad_question_files_say_which_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(content)
    with pytest.raises(QuestionSetError) as caught:
        read_questions(path)
    assert message in caught.value.message
    assert caught.value.remedy


def test_missing_question_file(tmp_path: Path) -> None:
    with pytest.raises(QuestionSetError, match="not found"):
        read_questions(tmp_path / "nope.jsonl")
