"""A model's thinking kept out of its answer (backends/thinking.py), and a system message folded into the first
question for templates that refuse one (backends/chat_template.py fold_system): pure parts."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from backends.base import ChatEvent, ChatMessage, Finished, TextDelta, Usage
from backends.chat_template import fold_system
from backends.thinking import ThinkingScanner, opens_thinking, without_thinking

THOUGHT = "<think>\nThe user asks about Oslo. It is in Norway. </thin not yet.\n</think>\n\nOslo is in Norway."


def shown(text: str, size: int, opened: bool = False) -> str:
    scanner = ThinkingScanner(inside=opened)
    out = [scanner.feed(text[start : start + size]) for start in range(0, len(text), size)]
    return "".join(out) + scanner.finish()


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_a_thinking_block_at_the_start_is_left_out_whatever_the_pieces(size: int) -> None:
    assert shown(THOUGHT, size) == "Oslo is in Norway."
    assert shown("  \n" + THOUGHT, size) == "Oslo is in Norway."
    # Qwen3 without thinking: the template wrote the empty block into the prompt; an empty one written is left out
    assert shown("<think>\n\n</think>\n\nOslo.", size) == "Oslo."
    # a template that opened the block in the prompt: the answer starts inside it
    assert shown("Let me see.\n</think>\nOslo.", size, opened=True) == "Oslo."


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_text_without_a_leading_block_is_shown_as_written_and_as_it_comes(size: int) -> None:
    for text in (
        "Oslo is in Norway.",
        "Use <think> tags in prompts.",  # not at the start: the answer's own words
        "Answer first. <think>later</think> still shown",
        "<thin",
        "",
    ):
        assert shown(text, size) == text
    scanner = ThinkingScanner()
    assert scanner.feed("Oslo ") == "Oslo " and scanner.feed("is") == "is"  # not held back


def test_thinking_that_never_ends_is_shown_as_written_rather_than_nothing() -> None:
    assert shown("<think>Still weighing it", 3) == "<think>Still weighing it"
    assert shown("weighing </thi", 4, opened=True) == "<think>weighing </thi"


def test_the_event_stream_keeps_its_other_events_and_its_end() -> None:
    events: list[ChatEvent] = [
        TextDelta("<think>x"),
        TextDelta("</think>\n"),
        TextDelta("Hi"),
        Usage(3, 4, 1.0, 2.0),
        Finished("stop"),
    ]
    out = list(without_thinking(events))
    assert out == [TextDelta("Hi"), Usage(3, 4, 1.0, 2.0), Finished("stop")]
    cut = list(without_thinking([TextDelta("<think>pondering"), Finished("length")]))
    assert cut == [TextDelta("<think>pondering"), Finished("length")]


def test_the_stream_stops_its_source_when_its_reader_stops() -> None:
    closed: list[bool] = []

    def source() -> Iterator[ChatEvent]:
        try:
            while True:
                yield TextDelta("word ")
        finally:
            closed.append(True)

    stream = without_thinking(source())
    assert next(stream) == TextDelta("word ")
    assert isinstance(stream, Generator)
    stream.close()
    assert closed == [True]


def test_a_prompt_opens_the_thinking_only_when_it_ends_inside_a_block() -> None:
    assert opens_thinking("<|im_start|>assistant\n<think>\n")
    assert not opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not opens_thinking("<|im_start|>assistant\n")


def test_a_system_message_opens_the_first_question_when_the_template_refuses_one() -> None:
    system = ChatMessage("system", "Answer in French.")
    question, answer = ChatMessage("user", "Where is Oslo?"), ChatMessage("assistant", "En Norvège.")
    assert fold_system([system, question, answer, question]) == [
        ChatMessage("user", "Answer in French.\n\nWhere is Oslo?"),
        answer,
        question,
    ]
    assert fold_system([question, answer]) == [question, answer]
    assert fold_system([system]) == [ChatMessage("user", "Answer in French.")]
    assert fold_system([]) == []
