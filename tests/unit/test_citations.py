"""Citations checked against the passages they name: moved only when the named passage holds none of the claim's
distinctive terms, to the passage that holds the most of them."""

from __future__ import annotations

from rag.citations import Moved, check_citations, terms_of
from rag.prompt import Source


def passages(*texts: str, first: int = 1) -> tuple[Source, ...]:
    return tuple(Source(first + i, "/docs/R-lang.pdf", 10 + i, None, text) for i, text in enumerate(texts))


OPERATORS = passages(
    "The outer product of arrays is formed with %o% and the Kronecker product with %x%.",
    "%% Modulus, binary %/% Integer divide, binary %*% Matrix product, binary",
    "Arithmetic on vectors is done element by element, recycling the shorter vector.",
)


def test_a_marker_on_a_passage_without_the_answer_moves_to_the_passage_that_states_it() -> None:
    checked = check_citations(
        "The %/% operator performs integer division. This can be found in [3].",
        "Which R operator performs integer division?",
        OPERATORS,
    )
    assert checked.text == "The %/% operator performs integer division. This can be found in [2]."
    assert checked.moved == (Moved(3, 2, ("%/%",), (1, 2, 3)),)
    assert checked.moved[0].words == "Citation corrected: the answer cites [3], but it is passage [2] that says “%/%”."


def test_a_marker_on_a_passage_that_holds_a_distinctive_term_is_left_alone() -> None:
    answer = "Integer division is %/% [2]."
    assert check_citations(answer, "Which R operator performs integer division?", OPERATORS).text == answer
    # "element" is in passage 3 and not in the question: the model's choice stands, even if another passage is better
    answer = "It works element by element with %/% [3]."
    assert check_citations(answer, "Which R operator performs integer division?", OPERATORS).moved == ()


def test_an_answer_with_nothing_distinctive_keeps_its_markers() -> None:
    for answer in ("The documents do not say [3].", "Integer division is described in [1].", "[2]"):
        assert check_citations(answer, "Which R operator performs integer division?", OPERATORS).text == answer


def test_a_number_that_names_no_source_is_corrected_where_a_passage_holds_the_claim_else_taken_off() -> None:
    moved = check_citations("%/% divides [9].", "Which operator divides?", OPERATORS)
    assert moved.text == "%/% divides [2]."
    assert moved.moved[0].words == "Citation corrected: the answer cites [9], which names no source; [2] says “%/%”."
    # a follow-up about a file given as [1] alone, cited as [3]: nothing to move it to, so it goes
    attached = passages("Hearth keeps its settings in settings.toml beside the data.")
    removed = check_citations("The file says the weather is fine [3].", "What does it say?", attached)
    assert removed.text == "The file says the weather is fine."
    assert removed.moved[0].words == "Citation removed: the answer cites [3], which names no source (given: [1])."
    kept = check_citations("It is in settings.toml [1, 4].", "Where?", attached)  # the given number stays
    assert kept.text == "It is in settings.toml [1]." and [m.to for m in kept.moved] == [None]


def test_answers_without_markers_or_without_sources_are_unchanged() -> None:
    assert check_citations("%/% divides.", "Which operator divides?", OPERATORS).text == "%/% divides."
    assert check_citations("%/% [1]", "q", ()).text == "%/% [1]"


def test_each_marker_is_checked_against_its_own_sentence() -> None:
    sources = passages(
        "The function eigen(Sm) calculates the eigenvalues and eigenvectors of a symmetric matrix.",
        "The function svd(M) takes an arbitrary matrix argument and calculates the singular value decomposition.",
    )
    checked = check_citations(
        "Use eigen() for eigenvalues [1]. The decomposition comes from svd() [1].", "Which functions?", sources
    )
    assert checked.text == "Use eigen() for eigenvalues [1]. The decomposition comes from svd() [2]."


def test_a_tie_goes_to_the_better_ranked_passage_and_a_group_keeps_its_other_numbers() -> None:
    sources = passages("glp_intopt is the MIP driver.", "Call glp_intopt after glp_simplex.", "Terminal output.")
    checked = check_citations("The driver is **glp_intopt** [3, 2].", "Which routine is the MIP driver?", sources)
    assert checked.text == "The driver is **glp_intopt** [1, 2]."
    checked = check_citations("The driver is glp_intopt [3][2].", "Which routine is the MIP driver?", sources)
    assert checked.text == "The driver is glp_intopt [1][2]."


def test_a_conversation_s_continued_numbers_are_kept() -> None:
    sources = passages("card(X) the number of elements of set X", "length(s) the length of string s", first=6)
    checked = check_citations("Use card(X) [7].", "Which function counts the elements of a set?", sources)
    assert checked.text == "Use card(X) [6]."


def test_terms_drop_markers_case_and_trailing_punctuation() -> None:
    assert terms_of("Use **Normal01()** [2], then GLP_DUALP.") == {"use", "normal01", "then", "glp_dualp"}
    assert "%/%" in terms_of("The %/% operator.")
