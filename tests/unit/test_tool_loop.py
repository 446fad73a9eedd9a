"""The tool loop (app/tools/loop.py) with a scripted model: calls asked about and run, refusals given back,
"always" remembered and a refusal answered without tools, the same call twice or an earlier result passed back
ending the calls, and the most calls per answer."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from app.tools.consent import ConsentBook
from app.tools.loop import REFUSED, CallAsked, CallDone, Decision, LoopNote, answer_with_tools, echoes_a_result
from app.tools.toolbox import ToolBox, built_in_tools
from backends.base import ChatEvent, ChatMessage, Finished, GenerationParams, TextDelta, ToolCall

QUESTION = [ChatMessage("user", "What is 12345 * 6789?")]


def call(expression: str) -> str:
    body = {"name": "calculator", "arguments": {"expression": expression}}
    return f"<tool_call>\n{json.dumps(body)}\n</tool_call>"


class Model:
    """Answers from a script, one reply per turn, and keeps what it was shown."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.seen: list[list[ChatMessage]] = []
        self.offered: list[int] = []
        self.lazy: list[bool] = []  # whether the call grammar let the answer be text (triggered by a call's tag)

    def __call__(self, history: Sequence[ChatMessage], params: GenerationParams) -> Iterator[ChatEvent]:
        self.seen.append(list(history))
        self.offered.append(len(params.tools))
        self.lazy.append(params.grammar is not None and bool(params.grammar.triggers))
        reply = self.replies.pop(0)
        for start in range(0, len(reply), 5):
            yield TextDelta(reply[start : start + 5])
        yield Finished("stop")


def run(model: Model, decide: Decision, tmp_path: Path, max_calls: int = 8) -> list[object]:
    asked: list[CallAsked] = []

    def ask(question: CallAsked) -> Decision:
        asked.append(question)
        return decide

    box = ToolBox(tuple(built_in_tools()))
    events = list(
        answer_with_tools(model, QUESTION, GenerationParams(), box, ask, ConsentBook(tmp_path / "c.json"), max_calls)
    )
    return [*events, asked]


def test_an_allowed_call_is_run_and_its_result_answered_from(tmp_path: Path) -> None:
    model = Model(call("12345 * 6789"), "It is 83810205.")
    *events, asked = run(model, "once", tmp_path)
    assert [type(e).__name__ for e in events] == [
        "CallAsked",
        "CallAsked",  # allowed: it runs now (the page stops asking about it)
        "CallDone",
        "TextDelta",
        "TextDelta",
        "TextDelta",
        "Finished",
    ]
    first, running = events[0], events[1]
    assert isinstance(first, CallAsked) and first.asking and not first.decided
    assert isinstance(running, CallAsked) and not running.asking and running.decided
    assert running.call == first.call
    done = next(e for e in events if isinstance(e, CallDone))
    assert done.allowed and done.result == "83810205" and not done.is_error
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is 83810205."
    second = model.seen[1]
    assert second[-2].tool_calls and second[-1] == ChatMessage("tool", "83810205", tool_call_id=done.call.id)
    assert len(asked) == 1 and model.offered == [1, 1]


def test_a_refused_call_is_not_run_and_the_model_is_told(tmp_path: Path) -> None:
    model = Model(call("1 + 1"), "I may not calculate it.")
    *events, _ = run(model, "deny", tmp_path)
    done = next(e for e in events if isinstance(e, CallDone))
    assert not done.allowed and done.result == REFUSED
    assert model.seen[1][-1].content == REFUSED


def test_always_is_remembered_and_not_asked_again(tmp_path: Path) -> None:
    run(Model(call("1 + 1"), "2."), "always", tmp_path)
    *_, asked = run(Model(call("2 + 2"), "4."), "deny", tmp_path)  # would refuse, but is not asked
    assert asked == []
    assert ConsentBook(tmp_path / "c.json").is_allowed("built-in", "calculator")


def test_the_same_call_twice_in_a_row_is_not_run_again_and_the_model_answers_without_tools(tmp_path: Path) -> None:
    model = Model(call("1 + 1"), call("1 + 1"), "It is 2.", "never reached")
    *events, _ = run(model, "once", tmp_path)
    notes = [e.text for e in events if isinstance(e, LoopNote)]
    assert notes and "same arguments again" in notes[0] and "without tools" in notes[0]
    assert sum(isinstance(e, CallDone) for e in events) == 1
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is 2."
    assert model.offered == [1, 1, 0]
    # The repeated call is not kept in the history the last answer reads: one call, its one result.
    assert [m.role for m in model.seen[2]][-3:] == ["user", "assistant", "tool"]


def test_after_the_most_calls_the_model_answers_without_tools(tmp_path: Path) -> None:
    model = Model(call("1 + 1"), call("2 + 2"), "Done: 4.")
    *events, _ = run(model, "once", tmp_path, max_calls=2)
    assert sum(isinstance(e, CallDone) for e in events) == 2
    assert any(isinstance(e, LoopNote) and "the most for one answer" in e.text for e in events)
    assert model.offered == [1, 1, 0]  # the last answer was asked without tools


def test_a_first_answer_asked_to_call_is_held_to_a_call_and_the_next_one_is_free(tmp_path: Path) -> None:
    model = Model(call("6 * 7"), "It is 42.")
    box = ToolBox(tuple(built_in_tools()))
    consent = ConsentBook(tmp_path / "c.json")
    events = list(answer_with_tools(model, QUESTION, GenerationParams(), box, lambda _: "once", consent, 8, "call"))
    assert [e.result for e in events if isinstance(e, CallDone)] == ["42"]
    assert model.lazy == [False, True] and model.offered == [1, 1]


def test_after_a_refused_call_the_model_answers_in_text_without_tools(tmp_path: Path) -> None:
    model = Model(call("1 + 1"), "You did not allow the calculator, so I cannot work it out.", "never reached")
    *events, _ = run(model, "deny", tmp_path)
    assert model.offered == [1, 0]  # no tools, so no tool list and no call markup in the answer asked for
    assert model.seen[1][-1] == ChatMessage("tool", REFUSED, tool_call_id=model.seen[1][-2].tool_calls[0].id)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).startswith("You did not allow")
    assert isinstance(events[-1], Finished)


def test_a_call_that_passes_an_earlier_result_back_ends_the_calls(tmp_path: Path) -> None:
    model = Model(call("12345 * 6789"), call("83810205"), "It is 83810205.", "never reached")
    *events, _ = run(model, "once", tmp_path)
    assert [e.result for e in events if isinstance(e, CallDone)] == ["83810205"]  # the echo is not run
    notes = [e.text for e in events if isinstance(e, LoopNote)]
    assert notes == [
        "The model passed an earlier result back to calculator; it answers from what it has, without tools."
    ]
    assert model.offered == [1, 1, 0]


def test_a_next_step_that_uses_an_earlier_result_is_still_run(tmp_path: Path) -> None:
    model = Model(call("12345 * 6789"), call("83810205 / 5"), "It is 16762041.")
    *events, _ = run(model, "once", tmp_path)
    assert [e.result for e in events if isinstance(e, CallDone)] == ["83810205", "16762041"]
    assert not [e for e in events if isinstance(e, LoopNote)]


def test_an_echo_is_an_argument_that_is_a_result_or_holds_a_long_one_whole() -> None:
    def asked(**arguments: object) -> ToolCall:
        return ToolCall("call_1", "keeper", json.dumps(arguments))

    found = "The last keeper of Skerry Light was Agnes Moll."
    assert echoes_a_result(asked(name="agnes moll."), ["Agnes Moll"])
    assert echoes_a_result(asked(query={"text": f"who is {found}"}), [found])
    assert not echoes_a_result(asked(name="Skerry Light"), [found])
    assert not echoes_a_result(asked(expression="42 * 2"), ["42"])
    assert not echoes_a_result(asked(name="x"), [""])
