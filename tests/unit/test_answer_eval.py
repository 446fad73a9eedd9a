"""The answer-accuracy rule and the question-set validation of `hearth eval answers`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.answer_eval import (
    AnswerQuestion,
    AnswerReport,
    AnswerResult,
    AnswerSetError,
    cited_numbers,
    contains,
    holds_expected,
    read_answer_questions,
    score_answer,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("answer", "wanted", "found"),
    [
        ("The codename is Dapper Drake [1].", "dapper drake", True),
        ("The codename is DAPPER\n  drake.", "Dapper Drake", True),  # case and whitespace do not matter
        ("It waits at least 140 days.", "14", False),  # a number inside a longer number is not that number
        ("Use sorted() to sort.", "sort", True),
        ("Use sorted().", "sort", False),
        ("It lives in ~/.bash_logout, read at exit.", ".bash_logout", True),
        ("The default is (',', ':').", "(',', ':')", True),
        ("See passage [14] for the details.", "14", False),  # citation markers are not part of the answer
        ("Ｆｕｌｌｗｉｄｔｈ 5.2", "fullwidth 5.2", True),  # NFKC
        ("version 3.11.2", "3.11", True),
        ("", "anything", False),
    ],
)
def test_contains_follows_the_documented_rule(answer: str, wanted: str, found: bool) -> None:
    assert contains(answer, wanted) is found


def test_every_item_must_appear_and_any_alternative_satisfies_an_item() -> None:
    expected = (("2022-04-21", "April 21, 2022"), ("Jammy",))
    assert holds_expected("Jammy Jellyfish came out on April 21, 2022.", expected)
    assert holds_expected("Jammy: 2022-04-21", expected)
    assert not holds_expected("It came out on 2022-04-21.", expected)  # Jammy missing
    assert not holds_expected("Jammy Jellyfish came out in April.", expected)


def test_citation_markers_are_read_in_every_form() -> None:
    assert cited_numbers("Yes [1]. Also [2, 3] and [4][5] and [ 6 ].") == [1, 2, 3, 4, 5, 6]
    assert cited_numbers("No citation, a list [a] or [].") == []


def test_score_counts_only_citations_of_passages_that_were_given() -> None:
    question = AnswerQuestion("Which?", (("Bookworm",),), 1)
    passages = ["12,Bookworm,bookworm", "11,Bullseye,bullseye"]
    good = score_answer(question, "Debian 12 is Bookworm [1].", passages)
    assert (good.correct, good.cited, good.stray_citations, good.answer_in_passages) == (True, True, 0, True)
    bare = score_answer(question, "[1]", passages)
    assert (bare.correct, bare.cited) == (False, False)  # a marker alone cites nothing
    stray = score_answer(question, "Bookworm [7].", passages)
    assert (stray.correct, stray.cited, stray.stray_citations) == (True, False, 1)
    missed = score_answer(question, "I do not know.", ["nothing relevant"])
    assert (missed.correct, missed.cited, missed.answer_in_passages) == (False, False, False)


def test_an_answer_is_credited_for_citing_the_passage_that_holds_it_not_any_passage() -> None:
    question = AnswerQuestion("Which option makes a pipeline fail?", (("pipefail",),), 1)
    passages = ["set -o pipefail makes the pipeline's status the last failing command's", "Readline variables"]
    right = score_answer(question, "Use pipefail [1].", passages)
    wrong = score_answer(question, "Use pipefail, found in [2].", passages)  # right words, wrong passage
    both = score_answer(question, "Use pipefail [2][1].", passages)
    assert (right.cited, right.cited_holds_answer) == (True, True)
    assert (wrong.cited, wrong.cited_holds_answer) == (True, False)
    assert both.cited_holds_answer
    assert not score_answer(question, "Use pipefail [7].", passages).cited_holds_answer
    report = AnswerReport(
        tuple(
            AnswerResult(question, a, score_answer(question, a, passages), 2, 10, 5, 1.0, "stop")
            for a in ("Use pipefail [1].", "Use pipefail, found in [2].")
        )
    )
    assert (report.cited, report.cited_right) == (2, 1) and report.cited_right_share == pytest.approx(0.5)


def test_the_per_question_record_says_which_passages_held_the_answer() -> None:
    from rag.answer_eval import result_record
    from rag.prompt import Source

    question = AnswerQuestion("Which option makes a pipeline fail?", (("pipefail",),), 3)
    sources = (
        Source(1, "/docs/bashref.pdf", 12, "The Set Builtin", "set -o pipefail makes the pipeline fail"),
        Source(2, "/docs/bashref.pdf", 80, None, "Readline variables"),
    )
    answer = "Use pipefail [2]."
    score = score_answer(question, answer, [s.text for s in sources])
    record = result_record(AnswerResult(question, answer, score, 2, 10, 5, 1.0, "stop", sources))
    given = record["sources"]
    assert isinstance(given, list)
    assert [(s["number"], s["file"], s["holds_answer"]) for s in given] == [
        (1, "bashref.pdf", True),
        (2, "bashref.pdf", False),
    ]
    assert (record["line"], record["cited_holds_answer"]) == (3, False)


def test_report_shares_are_over_every_question() -> None:
    question = AnswerQuestion("q", (("x",),), 1)
    passages = ["x is here"]
    results = tuple(
        AnswerResult(question, answer, score_answer(question, answer, passages), 1, 100, 10, seconds, "stop")
        for answer, seconds in (("x [1]", 1.0), ("x", 2.0), ("no", 3.0), ("no [1]", 6.0))
    )
    report = AnswerReport(results)
    assert (report.correct, report.cited, report.answerable) == (2, 2, 4)
    assert report.accuracy == pytest.approx(0.5)
    assert report.citation_share == pytest.approx(0.5)
    assert report.mean_seconds == pytest.approx(3.0)
    assert AnswerReport(()).accuracy == 0.0


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "qa.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reads_strings_alternatives_and_skips_blank_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        json.dumps({"question": " One? ", "expected": ["a", ["b", "c"]], "source": "x.pdf"}),
        "",
        json.dumps({"question": "Two?", "expected": "d"}),
    )
    first, second = read_answer_questions(path)
    assert first == AnswerQuestion("One?", (("a",), ("b", "c")), 1)
    assert second == AnswerQuestion("Two?", (("d",),), 3)


@pytest.mark.parametrize(
    ("line", "message", "remedy"),
    [
        ('{"question": "Q?", "expected": ["a"]', "is not valid JSON", "one JSON object per line"),
        ('["Q?", "a"]', "is not a JSON object", "Write it like"),
        ('{"question": "  ", "expected": ["a"]}', "has no question", "Fill it in"),
        ('{"expected": ["a"]}', "has no question", "Fill it in"),
        ('{"question": "Q?"}', 'has no "expected"', '"expected": ["Dapper Drake"]'),
        ('{"question": "Q?", "expected": []}', 'empty or malformed "expected"', "alternatives"),
        ('{"question": "Q?", "expected": {"a": 1}}', 'empty or malformed "expected"', "alternatives"),
        ('{"question": "Q?", "expected": ["a", 3]}', "non-empty string", "alternatives"),
        ('{"question": "Q?", "expected": [["a", " "]]}', "non-empty string", "alternatives"),
        ('{"question": "Q?", "expected": [[]]}', "non-empty string", "alternatives"),
        ('{"question": "Q?", "expected": ["a"], "conversation": 3}', "not a name", '"conversation": "csv-1"'),
        ('{"question": "Q?", "expected": ["a"], "conversation": " "}', "not a name", "or leave it out"),
    ],
)
def test_a_bad_line_is_named_with_its_number_and_a_remedy(tmp_path: Path, line: str, message: str, remedy: str) -> None:
    path = _write(tmp_path, json.dumps({"question": "Fine?", "expected": ["ok"]}), line)
    with pytest.raises(AnswerSetError) as caught:
        read_answer_questions(path)
    assert "qa.jsonl line 2" in caught.value.message
    assert message in caught.value.message
    assert remedy in caught.value.remedy


@pytest.mark.parametrize("content", [b"", b"\n\n", b"\xff\xfe not utf-8"])
def test_empty_or_unreadable_files_are_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_bytes(content)
    with pytest.raises(AnswerSetError) as caught:
        read_answer_questions(path)
    assert caught.value.remedy


def test_missing_file_and_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AnswerSetError, match="not found"):
        read_answer_questions(tmp_path / "absent.jsonl")
    with pytest.raises(AnswerSetError, match="is a folder"):
        read_answer_questions(tmp_path)


def test_the_shipped_question_set_is_valid_and_large_enough() -> None:
    questions = read_answer_questions(ROOT / "bench" / "data" / "debian-docs-answers.jsonl")
    assert len(questions) >= 60
    assert len({q.question for q in questions}) == len(questions)


def test_questions_naming_a_conversation_are_its_turns_in_line_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        *(
            json.dumps({"question": q, "expected": ["x"], **({"conversation": c} if c else {})})
            for q, c in (("A1?", "a"), ("Alone?", None), ("B1?", "b"), ("A2?", "a"), ("A3?", "a"), ("B2?", "b"))
        ),
    )
    asked = [(q.question, q.conversation, q.turn) for q in read_answer_questions(path)]
    assert asked == [
        ("A1?", "a", 1),
        ("Alone?", None, 1),
        ("B1?", "b", 1),
        ("A2?", "a", 2),
        ("A3?", "a", 3),
        ("B2?", "b", 2),
    ]


def test_a_follow_ups_citations_are_checked_against_its_own_numbers() -> None:
    """A follow-up's passages are numbered on from the conversation's earlier ones: [4] names its first passage."""
    question = AnswerQuestion("And with tabs?", (("delimiter",),), 2, "csv", 2)
    passages = ["Pass delimiter='\\t' to the reader", "Sniffer deduces the format"]
    right = score_answer(question, "Pass delimiter [4].", passages, [4, 5])
    assert (right.cited, right.cited_holds_answer, right.stray_citations) == (True, True, 0)
    stray = score_answer(question, "Pass delimiter [1].", passages, [4, 5])  # [1] belongs to an earlier answer
    assert (stray.cited, stray.stray_citations) == (False, 1)


def test_the_report_parts_first_questions_from_follow_ups() -> None:
    def result(turn: int, answer: str, tokens: int) -> AnswerResult:
        question = AnswerQuestion("q", (("x",),), turn, "c", turn)
        return AnswerResult(question, answer, score_answer(question, answer, ["x"]), 1, 100, tokens, 1.0, "stop")

    report = AnswerReport((result(1, "x [1]", 40), result(2, "no", 8), result(3, "x", 12), result(2, "x", 30)))
    first, later = report.turns(later=False), report.turns(later=True)
    assert (len(first.results), first.correct, first.median_completion_tokens) == (1, 1, 40.0)
    assert (len(later.results), later.correct, later.median_completion_tokens) == (3, 2, 12.0)


def test_the_conversation_set_is_whole_conversations_split_in_two_halves() -> None:
    path = ROOT / "bench" / "data" / "conversation-answers.jsonl"
    questions = read_answer_questions(path)
    conversations = {q.conversation for q in questions}
    assert None not in conversations and len(conversations) >= 8
    assert all(max(q.turn for q in questions if q.conversation == c) >= 3 for c in conversations)
    split = json.loads((ROOT / "bench" / "data" / "conversation-answers.split.json").read_text())
    halves = [{questions[n - 1].conversation for n in split[part]} for part in ("tuning", "held-out")]
    assert not halves[0] & halves[1]  # no conversation is in both halves
    assert sorted(split["tuning"] + split["held-out"]) == list(range(1, len(questions) + 1))
