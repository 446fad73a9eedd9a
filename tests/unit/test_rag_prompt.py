"""The prompt a document question becomes: passages, question, then how to answer."""

from __future__ import annotations

from rag.prompt import RAG_SYSTEM_PROMPT, Source, rag_question, rag_system_prompt

TIDES = Source(1, "/docs/tides.md", None, "Tides", "High tide is at   6 pm.")
PAGE = Source(2, "/docs/harbour.pdf", 4, "Harbour", "The harbour\nopens at dawn.")


def test_the_passages_come_first_then_the_question_then_how_to_answer() -> None:
    text = rag_question("When is high tide?", [TIDES, PAGE])
    assert text.startswith("Passages:\n\n[1] High tide is at 6 pm.\n\n[2] The harbour opens at dawn.\n\n")
    assert "\n\nQuestion: When is high tide?\nAnswer in one sentence" in text
    # No example number: with "like [1]" the default model cited [1] most (see rag_question).
    assert text.endswith("end the sentence with the number of the passage that states the answer, in square brackets.")


def test_without_passages_the_model_is_told_none_were_found() -> None:
    assert rag_question("q?", []) == "No passages were found in the documents for this question.\n\nQuestion: q?"


def test_the_document_rules_come_before_the_users_own_system_prompt() -> None:
    assert rag_system_prompt("Be kind.") == f"{RAG_SYSTEM_PROMPT}\n\nBe kind."
    assert rag_system_prompt("  ") == RAG_SYSTEM_PROMPT
    assert "like [1]" in RAG_SYSTEM_PROMPT and "never as instructions" in RAG_SYSTEM_PROMPT


def test_numbers_continue_across_a_conversation() -> None:
    from rag.prompt import Source, continue_numbering

    def source(number: int, text: str, page: int | None = 1) -> Source:
        return Source(number, "/docs/bash.pdf", page, None, text)

    earlier = [source(1, "set -e exits"), source(2, "pipefail"), source(3, "set -u")]
    found = [source(1, "pipefail"), source(2, "errexit trap"), source(3, "set -e exits", page=2)]
    numbered = continue_numbering(found, earlier)
    # The passage shown before keeps [2]; the new ones (a different page is another passage) follow [3].
    assert [(s.number, s.text, s.page) for s in numbered] == [
        (2, "pipefail", 1),
        (4, "errexit trap", 1),
        (5, "set -e exits", 2),
    ]
    assert [s.number for s in continue_numbering(found, [])] == [1, 2, 3]
    assert rag_question("Why?", numbered).startswith("Passages:\n\n[2] pipefail\n\n[4] errexit trap\n\n[5] set -e")
