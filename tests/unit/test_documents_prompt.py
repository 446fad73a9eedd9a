"""The prompt of a conversation answered from documents: each turn's prompt begins with the previous turn's prompt
and answer (so the engine's cache holds it), passages are shown once and named by number after, and a conversation
that outgrows the window is cut rarely and keeps its cut."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from app.services.answering.documents_prompt import (
    REFIT_SHARE,
    DocumentsTurn,
    assemble,
    paired_turns,
    replayed_cut,
    turn_messages,
)
from backends.base import ChatMessage
from models.shared.errors import ContextTooLong
from rag.prompt import Source


def words(messages: Sequence[ChatMessage]) -> int:
    return sum(len(m.content.split()) + 2 for m in messages)


def source(number: int, text: str) -> Source:
    return Source(number, "bashref.pdf", 3, None, text)


SET_E = source(1, "set -e exits on error")
PIPEFAIL = source(2, "pipefail makes a pipeline fail")
TRAP = source(3, "trap runs a command on a signal")


def test_each_turns_prompt_begins_with_the_previous_prompt_and_its_answer() -> None:
    first = [DocumentsTurn("What does set -e do?", (SET_E, PIPEFAIL))]
    asked = turn_messages("Rules.", first)
    answered = [DocumentsTurn("What does set -e do?", (SET_E, PIPEFAIL), "It exits on error [1].")]
    follow = turn_messages("Rules.", [*answered, DocumentsTurn("And trap?", (PIPEFAIL, TRAP))])
    assert follow[: len(asked)] == asked  # the cache of the first prompt serves the follow-up
    assert follow[len(asked)] == ChatMessage("assistant", "It exits on error [1].")
    last = follow[-1].content
    assert last.startswith("Passages:\n\n[3] trap runs a command on a signal\n\nAlso for this question: passages [2]")
    assert "pipefail makes" not in last  # shown once, named after
    only_above = turn_messages("Rules.", [*answered, DocumentsTurn("Again?", (SET_E,))])[-1].content
    assert only_above.startswith("For this question: passages [1] above.\n\nQuestion: Again?")


def test_a_plain_turn_earlier_is_shown_as_it_was_asked() -> None:
    turns = [DocumentsTurn("hi", (), "Hello!", from_documents=False), DocumentsTurn("set -e?", (SET_E,))]
    messages = turn_messages("", turns)
    assert [m.content for m in messages[:2]] == ["hi", "Hello!"]
    assert messages[2].content.startswith("Passages:\n\n[1] set -e")


def test_a_conversation_that_outgrows_the_window_is_cut_below_the_refit_share_and_keeps_that_cut() -> None:
    turns = [
        DocumentsTurn(f"question {n}", (source(n, "a passage of ten words or so " * 3),), "an answer " * 10)
        for n in range(1, 9)
    ]
    budget = words(turn_messages("Rules.", turns[:5])) + 5  # five turns fit, not six
    assert assemble("Rules.", turns[:5], budget, words).first_turn == 0
    cut = assemble("Rules.", turns[:6], budget, words)
    assert cut.first_turn > 1 and cut.prompt_tokens <= budget * REFIT_SHARE
    assert cut.dropped_messages == 2 * cut.first_turn
    assert cut.messages[1].content.startswith(f"Passages:\n\n[{cut.first_turn + 1}]")
    kept = assemble("Rules.", turns[:7], budget, words, keep_from=cut.first_turn)
    assert kept.first_turn == cut.first_turn  # room was left: the next turn keeps the same start (and cache)
    assert replayed_cut("Rules.", turns[:7], budget, words) == cut.first_turn


def test_a_passage_shown_only_by_a_turn_left_out_is_shown_again_in_full() -> None:
    turns = [DocumentsTurn("one", (SET_E,), "x " * 50), DocumentsTurn("two", (SET_E, PIPEFAIL))]
    messages = turn_messages("", turns[1:])
    assert messages[0].content.startswith("Passages:\n\n[1] set -e exits on error\n\n[2] pipefail")


def test_a_question_too_long_for_the_window_says_what_to_do() -> None:
    with pytest.raises(ContextTooLong, match="raise the context length"):
        assemble("Rules.", [DocumentsTurn("long " * 100, (SET_E,))], 50, words)


def test_only_alternating_question_and_answer_pairs_are_turns() -> None:
    user, assistant = ChatMessage("user", "q"), ChatMessage("assistant", "a")
    assert paired_turns([]) == []
    assert paired_turns([user, assistant, user, assistant]) == [("q", "a"), ("q", "a")]
    assert paired_turns([user, user]) is None
    assert paired_turns([assistant, user]) is None
    assert paired_turns([user]) is None
