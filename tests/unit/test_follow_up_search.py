"""The pure parts of searching a follow-up: the words searched, two rankings in turns, the previous files first."""

from __future__ import annotations

from app.services.answering.sources import interleaved, same_files_first, search_text
from rag.prompt import Candidate


def _passage(path: str, text: str) -> Candidate:
    return Candidate(path, None, None, text)


def test_a_follow_up_is_searched_with_the_question_before_it() -> None:
    previous = "Which tool turns a file of values into DER?"
    follow_up = "And to read that back?"
    assert search_text(follow_up, previous) == f"{previous}\n{follow_up}"


def test_a_first_question_is_searched_alone() -> None:
    assert search_text("Which tool checks ASN.1 syntax?", None) == "Which tool checks ASN.1 syntax?"
    assert search_text("Which tool checks ASN.1 syntax?", "  ") == "Which tool checks ASN.1 syntax?"


def test_two_rankings_are_taken_in_turns_each_passage_once() -> None:
    a, b, c, d = (_passage("x.md", t) for t in "abcd")
    assert interleaved([a, b, c], [b, d]) == [a, b, d, c]
    assert interleaved([], [d]) == [d]


def test_the_previous_files_passages_come_first_each_group_in_its_order() -> None:
    ranked = [_passage("r.pdf", "1"), _passage("csv.html", "2"), _passage("r.pdf", "3"), _passage("csv.html", "4")]
    first = same_files_first(ranked, ["csv.html"])
    assert [p.text for p in first] == ["2", "4", "1", "3"]
    assert same_files_first(ranked, []) == ranked
