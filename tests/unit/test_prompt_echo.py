"""Taking off the pieces of its prompt that a small model writes back into an answer from documents (the embedded
SmolLM2's answers on the conversation set), and leaving every other answer as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.prompt_echo import echo_only, without_prompt_echo

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"
QUESTION = "How do I silence the messages when I pop a stash?"


def test_a_first_line_that_writes_the_question_back_goes() -> None:
    written = "Question: How to wrap quotes around each field?\n\n[7] Use QUOTE_ALL for that."
    assert without_prompt_echo(written, QUESTION) == "[7] Use QUOTE_ALL for that."
    assert without_prompt_echo(f"{QUESTION}\nUse `git stash pop --quiet` [2].", QUESTION) == (
        "Use `git stash pop --quiet` [2]."
    )


def test_the_answer_ends_before_a_later_line_that_opens_a_part_of_the_prompt() -> None:
    for part in (
        "Question: And what about apply?\nAnswer: use -q.",
        "Also for this question: passages [9] above.",
        "**Passages:**\n\n[1] git stash pop",
        "Answer in one sentence from the passages above, and end the sentence with [n].",
    ):
        written = f"[4] Use --quiet to silence them.\n\n{part}"
        assert without_prompt_echo(written, QUESTION) == "[4] Use --quiet to silence them.", part


@pytest.mark.parametrize(
    "answer",
    [
        "Use `git stash pop --quiet` [2].",
        "The question: which flag? The answer is --quiet [2].",  # the words inside a line are not a prompt part
        "Use --quiet [2].\n\nThe next question you may have is how to keep the stash: use `apply`.",
        "",
        "\n\n",
    ],
)
def test_an_answer_without_an_echo_is_unchanged(answer: str) -> None:
    assert without_prompt_echo(answer, QUESTION) == answer
    assert not echo_only(answer, QUESTION)


def test_an_answer_that_only_points_at_a_passage_is_not_an_echo() -> None:
    for pointing in ("[1]", " [2].", "[1, 3]"):
        assert without_prompt_echo(pointing, QUESTION) == pointing and not echo_only(pointing, QUESTION)


def test_an_answer_that_is_only_the_echo_is_said_to_be_so() -> None:
    assert echo_only("Question: How to save rows from Python into a CSV file?", QUESTION)
    assert echo_only(f"  {QUESTION}", QUESTION)  # the question word for word
    # With a marker it points at a passage, and is left for the turn to have it named.
    assert without_prompt_echo(f"{QUESTION} [1]", QUESTION) == f"{QUESTION} [1]"
    assert not echo_only("Question: which flag?\n--quiet [2]", QUESTION)


def test_the_default_models_answers_on_file_are_unchanged_and_no_right_answer_of_the_small_one_is_touched() -> None:
    default = [
        "conversation-answers.tuning.today.qwen2.5-coder-1.5b.json",
        "conversation-answers.held-out.today.qwen2.5-coder-1.5b.json",
        "user-words-answers.held-out.qwen2.5-coder-1.5b.json",
    ]
    for name in default:
        rows = _rows(name)
        assert all(without_prompt_echo(r["answer"], r["question"]) == r["answer"] for r in rows), name
    small = _rows("conversation-answers.tuning.today.smollm2-135m.json")
    changed = [r for r in small if without_prompt_echo(r["answer"], r["question"]) != r["answer"]]
    assert len(changed) == 8 and not any(r["correct"] for r in changed)


def _rows(name: str) -> list[dict[str, object]]:
    written = json.loads((DATA / name).read_text())
    return list(written.get("rows") or written["results"])


def test_the_turn_builder_takes_the_echo_off_for_every_front_end_and_says_so() -> None:
    from app.services.answering.documents_turn import TurnPrompt, checked_only
    from app.services.answering.sources import FoundSources
    from backends.base import ChatMessage
    from rag.prompt import Source
    from rag.prompt_echo import ECHO_TAKEN_OFF, NOT_ANSWERED

    sources = (Source(1, "/docs/git-stash.html", None, "Options", "-q, --quiet: Quiet, suppress feedback messages."),)
    prompt = TurnPrompt((ChatMessage("user", QUESTION),), 40, 0, FoundSources(sources, 1.0, 1.0), QUESTION)
    final = checked_only(prompt, "Use --quiet to suppress feedback messages [1].\n\nQuestion: And for apply?")
    assert final.text == "Use --quiet to suppress feedback messages [1]." and final.notes == (ECHO_TAKEN_OFF,)
    only = checked_only(prompt, "Question: How can I pop a stash without the messages?")
    assert only.text == NOT_ANSWERED and only.notes == (NOT_ANSWERED,)
    plain = checked_only(prompt, "Use --quiet to suppress feedback messages [1].")
    assert plain.text == "Use --quiet to suppress feedback messages [1]." and plain.notes == ()
