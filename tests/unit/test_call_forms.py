"""Calls as the curated hub models write them (backends/call_forms.py through the stream scanner): Llama 3.x's bare
objects with "parameters", its python tag and ';' between calls, Phi-4-mini's functools list, Qwen's tagged form, a
list in a fence; text that only resembles them stays text; the lazy grammar takes over at each form's opening."""

from __future__ import annotations

import json
import re

import pytest

from backends.base import ToolCall, ToolSpec
from backends.call_forms import may_open, read_whole
from backends.tool_calls import CallScanner, calls_grammar, split_calls

OSLO = ("get_weather", {"city": "Oslo"})
BERGEN = ("get_weather", {"city": "Bergen"})

# Each as the model family writes a call in its answer (the forms its maker documents), with the calls meant.
WRITTEN = [
    ('{"name": "get_weather", "parameters": {"city": "Oslo"}}', [OSLO]),  # Llama 3.2
    ('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}', [OSLO]),  # Llama 3.1, tag shown
    (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}; '
        '{"name": "get_weather", "parameters": {"city": "Bergen"}}',
        [OSLO, BERGEN],
    ),
    ('functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}]', [OSLO]),  # Phi-4-mini
    (
        'functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}, '
        '{"name": "get_weather", "arguments": {"city": "Bergen"}}]',
        [OSLO, BERGEN],
    ),
    # the lazy grammar ends the answer after one call: the list's bracket is never closed
    ('functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}', [OSLO]),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>', [OSLO]),  # Qwen3, Qwen2.5
    ('```json\n[{"name": "get_weather", "parameters": {"city": "Oslo"}}]\n```', [OSLO]),
]


def calls_of(pieces: list[object]) -> list[tuple[str, object]]:
    return [(p.name, json.loads(p.arguments)) for p in pieces if isinstance(p, ToolCall)]


@pytest.mark.parametrize(("text", "meant"), WRITTEN)
def test_each_familys_written_calls_are_read_as_calls_whatever_the_pieces(
    text: str, meant: list[tuple[str, object]]
) -> None:
    for size in (1, 4, 1000):
        scanner = CallScanner()
        pieces: list[object] = []
        for start in range(0, len(text), size):
            pieces += scanner.feed(text[start : start + size])
        pieces += scanner.finish()
        assert calls_of(pieces) == meant, (text, size)
        assert not any(isinstance(p, str) and p.strip() for p in pieces), (text, size)
    said, calls = split_calls(text)
    assert said == "" and len({c.id for c in calls}) == len(meant)


@pytest.mark.parametrize(
    "text",
    [
        "functools.lru_cache keeps the results of earlier calls.",
        "[1] The answer is in the first source.",
        "<|python_tag|>print('hello')",  # Llama's code interpreter form: not a function call Hearth offers
        'functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}] and then some words',
        '{"name": "get_weather", "parameters": {"city": "Oslo"}}; not json',
    ],
)
def test_text_that_only_resembles_them_stays_the_text_it_is(text: str) -> None:
    said, calls = split_calls(text)
    assert calls == () and said == text


def test_an_answer_is_held_only_while_it_may_still_open_a_call() -> None:
    for opening in ("<|pyth", "<|python_tag|>", "functools", "functools[", "fun", "[", '[{"na', "```js"):
        assert may_open(opening), opening
    for text in ("functional", "[1]", "<|python_tag|>print", "The answer", '{"city"'):
        assert not may_open(text), text
    assert read_whole("functools[]") is None and read_whole("") is None


def test_the_lazy_grammar_takes_over_at_each_forms_opening() -> None:
    weather = ToolSpec("get_weather", "", json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}))
    triggers = [re.compile(t) for t in calls_grammar((weather,), None, required=False, parallel=True).triggers]
    for written in ('<|python_tag|>{"name"', 'functools[{"name"', '{"name"', "<tool_call>\n{"):
        matched = [t.fullmatch(written) for t in triggers]
        assert any(matched), written
        held = next(m for m in matched if m)
        assert written[held.start(1) :].lstrip().startswith(("{", "<tool_call>")), written  # the grammar reads a call
    assert not any(t.fullmatch("functools.lru_cache") for t in triggers)
