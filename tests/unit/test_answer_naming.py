"""An answer that points at a passage instead of naming the answer ("… is [1].") is found, and a follow-up's reply
fills the gap only when it is a short name the cited passage holds."""

from __future__ import annotations

import pytest

from rag.citations import check_citations
from rag.naming import Named, fill_name, pointed_at
from rag.prompt import Source

MIME_QUESTION = "Which command must an application run after installing or changing its MIME XML file?"
MIME = (
    Source(1, "/docs/shared-mime-info-spec.pdf", 4, None, "After installing, run update-mime-database to rebuild."),
    Source(2, "/docs/shared-mime-info-spec.pdf", 5, None, "The XML file lists the glob patterns of each type."),
)
POINTING = "The command that must an application run after installing or changing its MIME XML file is [1]."


def test_an_answer_made_only_of_the_question_and_a_marker_points_at_that_passage() -> None:
    assert pointed_at(POINTING, MIME_QUESTION, MIME) == 1
    assert (
        pointed_at(
            "The authors of the Sorting HOW TO are listed in [2].", "Who are the authors of the Sorting HOW TO?", MIME
        )
        == 2
    )


def test_an_answer_with_a_term_of_its_own_points_at_nothing() -> None:
    assert pointed_at("The command is update-mime-database [1].", MIME_QUESTION, MIME) is None
    assert pointed_at("Yes, an application must rebuild the cache [1].", MIME_QUESTION, MIME) is None


def test_an_answer_without_markers_or_citing_an_absent_passage_points_at_nothing() -> None:
    assert pointed_at("The command that must an application run is unknown.", MIME_QUESTION, MIME) is None
    assert pointed_at("The command that must an application run is [7].", MIME_QUESTION, MIME) is None
    assert pointed_at(POINTING, MIME_QUESTION, ()) is None


def test_the_name_goes_before_the_marker_it_answers_for() -> None:
    named = fill_name(POINTING, 1, "`update-mime-database`.", MIME_QUESTION, MIME)
    assert named == Named(
        1,
        "update-mime-database",
        "The command that must an application run after installing or changing its MIME XML file is "
        "update-mime-database [1].",
    )
    assert named.words == "Named from passage [1]: update-mime-database"


def test_after_a_pointing_word_the_name_follows_the_marker() -> None:
    sources = (Source(1, "/docs/sorting.docx", None, "Sorting HOW TO", "Author: Andrew Dalke and Raymond Hettinger"),)
    named = fill_name(
        "The authors of the Sorting HOW TO are listed in [1].",
        1,
        "Andrew Dalke and Raymond Hettinger",
        "Who are the authors of the Sorting HOW TO?",
        sources,
    )
    assert named is not None
    assert named.text == "The authors of the Sorting HOW TO are listed in [1]: Andrew Dalke and Raymond Hettinger."


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("MIME XML file", "only the question's words"),
        ("xdg-mime", "in no passage: made up"),
        ("", "empty"),
        ("Run update-mime-database after every change of the file, then restart the session.", "a sentence"),
        ("update-mime-database\nThen restart.", "more than a line"),
    ],
)
def test_a_reply_that_is_not_a_short_name_the_cited_passage_holds_is_dropped(reply: str, why: str) -> None:
    assert fill_name(POINTING, 1, reply, MIME_QUESTION, MIME) is None, why


def test_a_reply_for_a_passage_the_answer_does_not_cite_is_dropped() -> None:
    assert fill_name(POINTING, 2, "glob", MIME_QUESTION, MIME) is None


def test_a_name_another_passage_holds_is_kept_and_the_citation_check_then_moves_the_marker() -> None:
    named = fill_name(POINTING, 1, "glob", MIME_QUESTION, MIME)
    assert named is not None and named.text.endswith("is glob [1].")
    checked = check_citations(named.text, MIME_QUESTION, MIME)
    assert checked.text.endswith("is glob [2].")
