from pathlib import Path

import pytest

from rag.evaluation import (
    Question,
    QuestionSetError,
    Retrieved,
    evaluate,
    read_questions,
    score,
    unknown_gold_files,
)


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
        ('{"question": "q"}\n', 'line 1 has no "gold_file" (it has: question)'),
        ('{"question": "q", "file": "a.pdf"}\n', 'line 1 has no "gold_file" (it has: file, question)'),
        ('{"question": "q", "gold_file": "a"}\nnot json\n', "line 2 is not valid JSON"),
        ('{"question": "q", "gold_file": "a", "gold_page": "three"}\n', 'line 1 has "gold_page": "three"'),
        ('{"question": "q", "gold_file": "a", "gold_page": 0}\n', "it must be a page number from 1"),
        ('{"question": "q", "gold_file": "a", "gold_page": 2.5}\n', 'line 1 has "gold_page": 2.5'),
        ('{"question": "q", "gold_file": "a", "gold_page": true}\n', 'line 1 has "gold_page": true'),
        ('{"question": "q", "gold_file": "a", "gold_text": " ,. "}\n', '"gold_text" must be words'),
        ('{"question": "  ", "gold_file": "a"}\n', 'line 1 has an empty "question"'),
        ('{"question": "q", "gold_file": ""}\n', 'line 1 has an empty "gold_file"'),
        ('{"question": 3, "gold_file": "a"}\n', 'line 1 has a "question" that is not text'),
        ('["q", "a.pdf"]\n', "line 1 is a JSON list, not an object"),
        ("\n\n", "has no questions"),
    ],
)
def test_bad_question_files_say_which_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(content)
    with pytest.raises(QuestionSetError) as caught:
        read_questions(path)
    assert message in caught.value.message
    assert '"gold_file"' in caught.value.remedy


def test_every_bad_line_is_named_at_once(tmp_path: Path) -> None:
    good = '{"question": "q", "gold_file": "a.pdf"}'
    lines = [good, '{"question": "no gold"}', good, "{broken", *['{"question": "x"}'] * 6]
    path = tmp_path / "qa.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(QuestionSetError) as caught:
        read_questions(path)
    message = caught.value.message
    assert message.startswith("qa.jsonl: 8 lines cannot be used: line 2 has no")
    assert "line 4 is not valid JSON" in message
    assert "line 7" in message and "line 8" not in message  # five named, the rest counted
    assert message.endswith("and 3 more lines.")


def test_gold_text_and_paths_in_gold_file(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(
        '{"question": "q", "gold_file": "docs/ubuntu.csv", "gold_text": "Dapper Drake", "gold_page": "2"}\n'
        '{"question": "r", "gold_file": "C:\\\\docs\\\\b.md", "expected": ["ignored"]}\n'
    )
    assert read_questions(path) == [Question("q", "ubuntu.csv", 2, "Dapper Drake"), Question("r", "b.md")]


def test_gold_text_must_be_in_the_passage() -> None:
    question = Question("codename of 6.06?", "ubuntu.csv", gold_text="6.06 LTS, Dapper Drake")
    other_row = Retrieved("ubuntu.csv", None, "6.10,Edgy Eft,edgy,2006-06-01")
    right_row = Retrieved("ubuntu.csv", None, "version 6.06   LTS · dapper\ndrake · series dapper")
    assert score(question, [other_row, right_row]).rank == 2
    assert score(question, [other_row]).rank is None


def test_unknown_gold_files_are_listed_with_question_numbers() -> None:
    questions = [Question("a", "x.pdf"), Question("b", "typo.pdf"), Question("c", "typo.pdf")]
    assert unknown_gold_files(questions, {"x.pdf", "y.md"}) == {"typo.pdf": [2, 3]}


def test_latency_is_timed_per_question() -> None:
    ticks = iter([0.0, 0.010, 1.0, 1.030, 2.0, 2.020])
    report = evaluate([Question(q, "x.md") for q in "abc"], lambda q: [], 5, clock=lambda: next(ticks))
    assert [round(r.latency_ms) for r in report.results] == [10, 30, 20]
    assert round(report.latency_percentile_ms(0.5)) == 20
    assert round(report.latency_percentile_ms(0.9)) == 30


def test_unreadable_question_files(tmp_path: Path) -> None:
    (tmp_path / "latin1.jsonl").write_bytes(b'{"question": "caf\xe9", "gold_file": "a"}\n')
    with pytest.raises(QuestionSetError, match="not UTF-8"):
        read_questions(tmp_path / "latin1.jsonl")
    with pytest.raises(QuestionSetError, match="is a folder"):
        read_questions(tmp_path)


def test_missing_question_file(tmp_path: Path) -> None:
    with pytest.raises(QuestionSetError, match="not found"):
        read_questions(tmp_path / "nope.jsonl")


def test_an_answer_set_line_reads_as_a_question_with_its_expected_strings() -> None:
    from rag.evaluation import parse_question

    read = parse_question({"question": "Which flag?", "expected": ["-e", ["errexit", "exit"]], "source": "b.pdf"})
    assert isinstance(read, Question)
    assert read.gold_file == "b.pdf" and read.expected == (("-e",), ("errexit", "exit"))
    plain = parse_question({"question": "Which flag?", "gold_file": "b.pdf"})
    assert isinstance(plain, Question) and plain.expected == ()
    assert (
        parse_question({"question": "Which flag?", "source": "b.pdf"})
        == 'has no "gold_file" (it has: question, source)'
    )
