"""The wait before the first word, from the engine's reports of how far it has read the prompt: the words, the
estimate from the pace since the first report, the page's answer showing it until the first word, and the tool
loop's reader passing the reports through."""

from __future__ import annotations

from app.reading_pace import ReadingPace, reading_line
from app.services.answering.chat import TurnStarted
from app.ui.render import AnswerView
from backends.base import Finished, Reading, TextDelta, ToolCall
from backends.tool_calls import calls_in


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_words_say_how_far_and_how_long_is_left() -> None:
    assert reading_line("your question", 512, 2731, None) == "Reading your question: 512 of 2,731 tokens…"
    assert reading_line("your question", 1024, 2731, 20.4).endswith(", about 20 s left…")
    assert reading_line("your question", 1024, 20_000, 600).endswith(", about 10 min left…")


def test_the_estimate_is_the_pace_since_the_first_report() -> None:
    clock = Clock()
    pace = ReadingPace(clock)
    assert pace.left_s(512, 2560) is None  # one report: no pace yet
    clock.now += 4.0
    assert pace.left_s(1024, 2560) == 12.0  # 512 tokens in 4 s; 1,536 to go
    assert pace.left_s(256, 900) is None  # a new prompt starts over


def test_the_answer_shows_the_engines_progress_until_its_first_word() -> None:
    clock = Clock()
    view = AnswerView([], pace=ReadingPace(clock))
    view.apply(TurnStarted("c1", 0, 2731, attachments=()))
    shown = view.apply(Reading(512, 2731))[-1]["content"]
    assert "Reading your question and the conversation: 512 of 2,731 tokens…" in shown
    clock.now += 2.0
    assert "1,024 of 2,731 tokens, about 7 s left…" in view.apply(Reading(1024, 2731))[-1]["content"]
    assert "Reading" not in view.apply(TextDelta("Lamp 80."))[-1]["content"]  # the answer itself from now on


def test_the_tool_loops_reader_passes_the_reports_through() -> None:
    events = [Reading(512, 1500), TextDelta('<tool_call>{"name": "f", "arguments": {}}</tool_call>'), Finished("stop")]
    out = list(calls_in(events))
    assert out[0] == Reading(512, 1500)
    assert isinstance(out[1], ToolCall) and out[-1] == Finished("stop")
