from collections.abc import Sequence

import pytest

from app.services.answering.history import answer_reserve, fit_history
from backends.base import ChatMessage
from models.shared.errors import ContextTooLong


def words(messages: Sequence[ChatMessage]) -> int:
    """A counter like a real template: one framing token per message plus the words."""
    return sum(len(m.content.split()) + 1 for m in messages) + 1


def conversation(turns: int, words_per_message: int = 10) -> list[ChatMessage]:
    messages = [ChatMessage("system", "be brief")]
    for index in range(turns):
        messages.append(ChatMessage("user", f"q{index} " + "w " * (words_per_message - 1)))
        messages.append(ChatMessage("assistant", f"a{index} " + "w " * (words_per_message - 1)))
    messages.append(ChatMessage("user", "last question"))
    return messages


def test_history_that_fits_is_kept_whole() -> None:
    messages = conversation(3)
    fitted = fit_history(messages, budget_tokens=1000, count=words)
    assert fitted.messages == tuple(messages)
    assert fitted.dropped == 0
    assert fitted.prompt_tokens == words(messages)


@pytest.mark.parametrize(
    ("turns", "budget", "expected_dropped"),
    [
        (3, words(conversation(3)) - 1, 2),  # one token over: the oldest turn (2 messages) goes
        (3, words(conversation(1)), 4),  # room for exactly one old turn
        (5, words(conversation(0)), 10),  # room for the new question only
    ],
)
def test_oldest_turns_are_dropped_first_and_whole(turns: int, budget: int, expected_dropped: int) -> None:
    messages = conversation(turns)
    fitted = fit_history(messages, budget, words)
    assert fitted.dropped == expected_dropped
    assert fitted.messages[0] == ChatMessage("system", "be brief")
    assert fitted.messages[-1] == messages[-1]
    assert fitted.messages[1].role == "user"  # never an answer without its question
    assert fitted.prompt_tokens <= budget
    assert fitted.messages[1:] == tuple(messages[1 + expected_dropped :])


def test_a_message_longer_than_the_context_is_refused_with_a_remedy() -> None:
    messages = [ChatMessage("system", "s"), ChatMessage("user", "word " * 500)]
    with pytest.raises(ContextTooLong) as caught:
        fit_history(messages, budget_tokens=100, count=words)
    assert "Shorten the message" in caught.value.remedy
    assert "504" in caught.value.message  # the real size of the prompt, so the user knows how far off it is


def test_history_without_system_prompt() -> None:
    messages = conversation(2)[1:]
    fitted = fit_history(messages, words(messages) - 1, words)
    assert fitted.messages[0].role == "user"
    assert fitted.dropped == 2


@pytest.mark.parametrize(("context", "asked", "reserve"), [(4096, 512, 512), (4096, 4000, 1024), (256, 1, 1)])
def test_answer_reserve_is_capped_at_a_quarter_of_the_window(context: int, asked: int, reserve: int) -> None:
    assert answer_reserve(context, asked) == reserve
