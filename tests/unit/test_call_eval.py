"""Scoring tool calls (app/tools/call_eval.py): the right function with the right arguments, a needless or missed
call, a call invalid for its schema, and question sets that cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.tools.call_eval import read_tool_questions, report, score_calls
from backends.base import ToolCall
from models.shared.errors import HearthError

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
}
TIP = {
    "name": "calculate_tip",
    "description": "Work out a tip.",
    "parameters": {
        "type": "object",
        "properties": {"bill": {"type": "number"}, "percent": {"type": "number"}},
        "required": ["bill", "percent"],
    },
}


def questions(tmp_path: Path, *lines: dict[str, object]) -> Path:
    path = tmp_path / "tools.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall("call_1", name, json.dumps(arguments))


def test_a_call_is_right_when_each_checked_argument_is_one_of_its_values(tmp_path: Path) -> None:
    expected = {"name": "get_weather", "arguments": {"city": ["Bergen", "Bergen, Norway"], "unit": ["celsius", None]}}
    (question,) = read_tool_questions(
        questions(tmp_path, {"question": "Umbrella?", "functions": [WEATHER, TIP], "expected": expected})
    )
    assert score_calls(question, [call("get_weather", city="  bergen. ")]).outcome == "right call"
    assert score_calls(question, [call("get_weather", city="Bergen, Norway", unit="celsius")]).outcome == "right call"
    wrong = score_calls(question, [call("get_weather", city="Oslo")])
    assert (wrong.outcome, wrong.detail) == ("wrong call", 'city was "Oslo"')
    assert score_calls(question, [call("get_weather", city="Bergen", unit="fahrenheit")]).outcome == "wrong call"
    other = score_calls(question, [call("calculate_tip", bill=1, percent=2)])
    assert (other.outcome, other.detail) == ("wrong call", "called calculate_tip, not get_weather")
    assert score_calls(question, []).outcome == "missed"
    same_twice = [call("get_weather", city="Bergen"), call("get_weather", city="Bergen")]
    assert score_calls(question, same_twice).outcome == "right call"
    two = score_calls(question, [call("get_weather", city="Bergen"), call("get_weather", city="Oslo")])
    assert two.outcome == "wrong call" and "2 different calls" in two.detail


def test_numbers_are_compared_by_value_and_invalid_calls_are_named(tmp_path: Path) -> None:
    expected = {"name": "calculate_tip", "arguments": {"bill": [42.5], "percent": [20]}}
    (question,) = read_tool_questions(
        questions(tmp_path, {"question": "Tip?", "functions": [TIP], "expected": expected})
    )
    assert score_calls(question, [call("calculate_tip", bill=42.50, percent=20.0)]).outcome == "right call"
    assert score_calls(question, [call("calculate_tip", bill="42.5", percent=20)]).outcome == "invalid call"
    unknown = score_calls(question, [call("get_weather", city="x")])
    assert (unknown.outcome, unknown.detail) == ("invalid call", "called 'get_weather', which is not offered")
    broken = score_calls(question, [ToolCall("c", "calculate_tip", "{not json")])
    assert broken.outcome == "invalid call" and broken.detail == "its arguments are not JSON"


def test_no_call_is_right_when_none_is_needed(tmp_path: Path) -> None:
    (question,) = read_tool_questions(
        questions(tmp_path, {"question": "Who wrote Emma?", "functions": [WEATHER], "expected": None})
    )
    assert score_calls(question, []).outcome == "right abstention"
    needless = score_calls(question, [call("get_weather", city="Bath")])
    assert needless.outcome == "needless call"
    counted = report(["right call", "right abstention", "missed", "missed"])
    assert (counted.right, counted.total, counted.share("missed")) == (2, 4, 0.5)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ({"question": "", "functions": [WEATHER], "expected": None}, "the question is empty"),
        ({"question": "q", "functions": [], "expected": None}, "no functions are offered"),
        ({"question": "q", "functions": [WEATHER], "expected": {"name": "nope", "arguments": {}}}, "is not offered"),
        ({"question": "q", "functions": [WEATHER]}, "'expected'"),
    ],
)
def test_a_set_that_cannot_be_read_names_its_line(tmp_path: Path, line: dict[str, object], says: str) -> None:
    path = questions(tmp_path, {"question": "fine", "functions": [WEATHER], "expected": None}, line)
    with pytest.raises(HearthError, match=r"Line 2 of tools\.jsonl") as caught:
        read_tool_questions(path)
    assert says in caught.value.message


def test_the_committed_set_reads_and_its_halves_split_calls_and_abstentions_evenly() -> None:
    path = Path(__file__).parents[2] / "bench" / "data" / "tool-calls.jsonl"
    read = read_tool_questions(path)
    split = json.loads(path.with_name("tool-calls.split.json").read_text())
    assert sorted(split["tuning"] + split["held-out"]) == list(range(1, len(read) + 1))
    for part in ("tuning", "held-out"):
        chosen = [read[n - 1] for n in split[part]]
        assert sum(q.expected is None for q in chosen) == 10 and sum(q.expected is not None for q in chosen) == 20
