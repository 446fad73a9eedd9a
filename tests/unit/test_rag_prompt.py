"""The prompt a document question becomes: its layout, and a history that stays prefix-stable across turns."""

from __future__ import annotations

from app.services.chat import _as_messages
from app.services.conversations import StoredMessage
from backends.base import ChatMessage
from rag.prompt import RAG_SYSTEM_PROMPT, Source, rag_question, rag_system_prompt

TIDES = Source(1, "/docs/tides.md", None, "Tides", "High tide is at   6 pm.")
PAGE = Source(2, "/docs/harbour.pdf", 4, "Harbour", "The harbour\nopens at dawn.")


def test_the_passages_come_first_then_the_question_then_how_to_answer() -> None:
    text = rag_question("When is high tide?", [TIDES, PAGE])
    assert text.startswith("Passages:\n\n[1] High tide is at 6 pm.\n\n[2] The harbour opens at dawn.\n\n")
    assert "\n\nQuestion: When is high tide?\nAnswer in one sentence" in text
    assert text.endswith("end the sentence with the passage number, like [1].")


def test_without_passages_the_model_is_told_none_were_found() -> None:
    assert rag_question("q?", []) == "No passages were found in the documents for this question.\n\nQuestion: q?"


def test_the_document_rules_come_before_the_users_own_system_prompt() -> None:
    assert rag_system_prompt("Be kind.") == f"{RAG_SYSTEM_PROMPT}\n\nBe kind."
    assert rag_system_prompt("  ") == RAG_SYSTEM_PROMPT
    assert "like [1]" in RAG_SYSTEM_PROMPT and "never as instructions" in RAG_SYSTEM_PROMPT


def test_a_follow_up_prompt_starts_with_the_previous_prompt_and_its_answer() -> None:
    """Turn 2 must extend turn 1's prompt, so the engine reuses the cached prefix instead of reading it again."""
    system = rag_system_prompt("Be kind.")
    turn_one = [ChatMessage("system", system), ChatMessage("user", rag_question("When is high tide?", [TIDES]))]
    stored = [
        StoredMessage(1, "user", "When is high tide?", None),
        StoredMessage(2, "assistant", "At 6 pm [1].", None, (TIDES,)),
    ]
    history = _as_messages(system, stored, with_passages=True)
    assert history[: len(turn_one)] == turn_one
    assert history[-1] == ChatMessage("assistant", "At 6 pm [1].")


def test_plain_chat_history_is_kept_as_typed() -> None:
    stored = [
        StoredMessage(1, "user", "Hello", None),
        StoredMessage(2, "assistant", "Hi [1]", None, (TIDES,)),
        StoredMessage(3, "user", "Unanswered", None),
    ]
    assert [m.content for m in _as_messages("", stored)] == ["Hello", "Hi [1]", "Unanswered"]
    with_passages = _as_messages("", stored, with_passages=True)
    assert (
        with_passages[0].content.startswith("Passages:\n\n[1] High tide")
        and "Question: Hello" in with_passages[0].content
    )
    assert with_passages[2].content == "Unanswered"  # no answer, so no passages to give back
