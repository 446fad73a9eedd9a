"""An answer that cites passages none of which hold any of its own terms says it was not found in the documents,
and names no page for it (rag/support.py), through the one turn builder every front end finishes with."""

from __future__ import annotations

from app.services.answering.documents_turn import TurnPrompt, checked_only
from app.services.answering.sources import FoundSources
from backends.base import ChatMessage
from rag.prompt import Source
from rag.support import Unsupported, not_found_answer, unsupported

CSV = (
    Source(1, "/docs/python-csv.html", None, "Module Contents", "csv.reader(csvfile) returns a reader object"),
    Source(
        2,
        "/docs/python-csv.html",
        None,
        "Reader Objects",
        "DictReader objects have the following public attribute: fieldnames. If not passed as a parameter when the "
        "object was created, this attribute is initialized upon first access or when the first record is read.",
    ),
)
QUESTION = "When does the dict-based reader fill in its column names if I didn't pass them?"
# Answered by the default model on the user's-words set (line 75): its own terms are in no passage.
EVASIVE = "The dict-based reader fills in its column names when you don't pass them by default. This is stated in [2]."


def test_a_citing_answer_whose_terms_no_passage_holds_is_unsupported() -> None:
    found = unsupported(EVASIVE, QUESTION, CSV)
    assert found == Unsupported(("default", "fills"))  # "don" of "don't" is no term
    assert found.words == (
        "Not found in the documents: no passage given mentions “default” or “fills”; citations taken off."
    )


def test_an_answer_a_passage_supports_even_by_one_term_is_left_alone() -> None:
    assert unsupported("It fills them in on first access [2].", QUESTION, CSV) is None
    # a plural the passage has in the singular is held: "records" by "record"
    assert unsupported("Upon reading records, in bulk [1].", QUESTION, CSV) is None


def test_an_answer_without_citations_or_without_terms_of_its_own_is_left_alone() -> None:
    # one that says the passages do not hold it cites nothing; that is already not a confident citation
    assert unsupported("The passages do not mention when defaults are filled.", QUESTION, CSV) is None
    # its only terms are the question's: nothing to judge by
    assert unsupported("The dict-based reader fills in column names [2].", QUESTION, CSV) is None
    assert unsupported(EVASIVE, QUESTION, ()) is None


def test_the_unsupported_answer_says_so_first_and_cites_no_page() -> None:
    found = Unsupported(("default", "fills"))
    assert not_found_answer("It fills them by default [2]. See also [1, 2] .", found) == (
        "I could not find this in the documents: no passage mentions “default” or “fills”.\n\n"
        "Without a source, and possibly wrong: It fills them by default. See also."
    )
    lead = "I could not find this in the documents: no passage mentions “default” or “fills”."
    assert not_found_answer("[2]", found) == lead


def test_the_turn_builder_finishes_an_unsupported_answer_for_every_front_end() -> None:
    prompt = TurnPrompt((ChatMessage("user", QUESTION),), 40, 0, FoundSources(CSV, 1.0, 1.0), QUESTION)
    final = checked_only(prompt, EVASIVE)
    assert final.text.startswith("I could not find this in the documents: no passage mentions “default” or “fills”.")
    assert "[2]" not in final.text and final.moved == ()
    assert final.unsupported is not None and final.notes == (final.unsupported.words,)
    supported = checked_only(prompt, "On first access, or when the first record is read [1].")
    assert supported.unsupported is None and supported.text.endswith("[2].")  # moved to the passage holding it
