"""Tool calls in the model's text (backends/tool_calls.py): read back whole or as they stream, in every form small
models write them; offered to templates that know tools and to those that do not; and the grammar's shape."""

from __future__ import annotations

import json

import pytest

from backends.base import ChatMessage, ToolCall, ToolSpec
from backends.tool_calls import (
    CallArguments,
    CallBegun,
    CallScanner,
    calls_grammar,
    generic_messages,
    split_calls,
    template_family,
)
from models.shared.errors import InvalidChoice

WEATHER = ToolSpec(
    "get_weather",
    "Current weather in a city",
    json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
)
TAGGED = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'


def calls_of(pieces: list[str | ToolCall]) -> list[tuple[str, dict[str, object]]]:
    return [(p.name, json.loads(p.arguments)) for p in pieces if isinstance(p, ToolCall)]


def streamed(text: str, size: int) -> list[str | ToolCall]:
    scanner = CallScanner()
    pieces: list[str | ToolCall] = []
    for start in range(0, len(text), size):
        pieces += scanner.feed(text[start : start + size])
    return pieces + scanner.finish()


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_a_tagged_call_is_read_whatever_the_pieces_it_streams_in(size: int) -> None:
    pieces = streamed(TAGGED, size)
    assert "".join(p for p in pieces if isinstance(p, str)) == "Let me look.\n"
    assert calls_of(pieces) == [("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{\n  "name": "get_weather",\n  "arguments": {"city": "Oslo"}\n}\n```',
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        ' ```\n{"name": "get_weather", "parameters": {"city": "Oslo"}}```',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}',  # the closing marker cut off
        # As Qwen2.5's template shows a call, and its models write one: braces doubled, the last one kept or not.
        '{{"name": "get_weather", "arguments": {"city": "Oslo"}}}',
        '{{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    ],
)
def test_bare_fenced_and_unclosed_calls_are_read(text: str) -> None:
    for size in (1, 5, 1000):
        pieces = streamed(text, size)
        assert calls_of(pieces) == [("get_weather", {"city": "Oslo"})], (text, size)
        assert not any(isinstance(p, str) and p.strip() for p in pieces)
    said, calls = split_calls(text)
    assert said == "" and [c.name for c in calls] == ["get_weather"] and calls[0].id.startswith("call_")


# Arguments with what could end them early: a closing marker, braces and quotes inside strings, nested values.
TRICKY = '{"city": "Oslo }</tool_call> {", "note": "a \\"quoted\\" \\\\ word", "days": [1, {"x": [2]}]}'


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_a_tagged_call_streams_its_name_first_then_its_arguments_as_written(size: int) -> None:
    text = f'Let me look.\n<tool_call>\n{{"name": "get_weather", "arguments": {TRICKY}}}\n</tool_call>\nDone.'
    scanner = CallScanner(pieces=True)
    pieces: list[object] = []
    for start in range(0, len(text), size):
        pieces += scanner.feed(text[start : start + size])
    pieces += scanner.finish()
    [begun] = [p for p in pieces if isinstance(p, CallBegun)]
    [call] = [p for p in pieces if isinstance(p, ToolCall)]
    written = [p.text for p in pieces if isinstance(p, CallArguments)]
    assert begun.name == "get_weather" and call.id == begun.id and call.name == "get_weather"
    assert "".join(written) == TRICKY and json.loads(TRICKY) == json.loads(call.arguments)
    at = [i for i, p in enumerate(pieces) if isinstance(p, CallArguments)]
    assert pieces.index(begun) < min(at) and max(at) < pieces.index(call)  # named first, whole last
    assert len(written) > 1 if size < len(TRICKY) else len(written) == 1  # as it comes, not once it is whole
    assert "".join(p for p in pieces if isinstance(p, str)) == "Let me look.\n\nDone."
    # the same answer read without pieces gives the same call and text
    whole = streamed(text, size)
    assert calls_of(whole) == calls_of(pieces) and not [p for p in whole if isinstance(p, CallBegun | CallArguments)]


def test_calls_in_other_forms_are_not_streamed_in_pieces() -> None:
    for text in (
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        '<tool_call>\n{{"name": "get_weather", "arguments": {"city": "Oslo"}}}\n</tool_call>',
        '<tool_call>\n{"arguments": {"city": "Oslo"}, "name": "get_weather"}\n</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}\n</tool_call>',
    ):
        scanner = CallScanner(pieces=True)
        pieces = [*scanner.feed(text), *scanner.finish()]
        assert calls_of(pieces) == [("get_weather", {"city": "Oslo"})], text  # read whole, at its end
        assert not [p for p in pieces if isinstance(p, CallBegun | CallArguments)], text


def test_text_that_only_looks_like_a_call_streams_out_as_text() -> None:
    for text in (
        "```python\nprint('hi')\n```",
        '{"city": "Oslo"}',
        "Use <tool_call> tags like <tool_call>not json</tool_call> here.",
        "A <tool_c",
    ):
        for size in (1, 4, 1000):
            pieces = streamed(text, size)
            assert "".join(p for p in pieces if isinstance(p, str)) == text and not calls_of(pieces)
    # text streams as it comes: it is not held back until the end
    scanner = CallScanner()
    assert scanner.feed("The weather is ") == ["The weather is "]
    assert scanner.feed("fine <tool") == ["fine "] and scanner.finish() == ["<tool"]


def test_parallel_calls_come_in_order() -> None:
    second = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Bergen"}}\n</tool_call>'
    said, calls = split_calls(f"{TAGGED}\n{second}")
    assert said == "Let me look." and [json.loads(c.arguments)["city"] for c in calls] == ["Oslo", "Bergen"]
    assert calls[0].id != calls[1].id


def test_templates_that_render_tools_are_told_apart() -> None:
    qwen = (
        "{%- if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools> <tool_call>{%- endif %}"
    )
    assert template_family(qwen) == "native"
    assert template_family("{% for message in messages %}{{ message['content'] }}{% endfor %}") == "generic"
    assert template_family(None) == "generic"


def test_a_template_without_tools_gets_them_and_the_earlier_calls_written_into_the_turns() -> None:
    call = ToolCall("call_1", "get_weather", '{"city": "Oslo"}')
    turns = generic_messages(
        [
            ChatMessage("system", "Be brief."),
            ChatMessage("user", "Weather in Oslo?"),
            ChatMessage("assistant", "", (call,)),
            ChatMessage("tool", '{"temp": 4}', tool_call_id="call_1"),
            ChatMessage("tool", '{"sky": "rain"}', tool_call_id="call_2"),
        ],
        (WEATHER,),
    )
    assert [t.role for t in turns] == ["system", "user", "assistant", "user"]  # still alternating
    assert turns[0].content.startswith("Be brief.\n\nYou may call functions") and '"get_weather"' in turns[0].content
    assert turns[2].content == '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    assert turns[3].content == (
        '<tool_response>\n{"temp": 4}\n</tool_response>\n<tool_response>\n{"sky": "rain"}\n</tool_response>'
    )
    assert generic_messages([ChatMessage("user", "hi")], ())[0] == ChatMessage("user", "hi")


def test_the_grammar_is_lazy_for_auto_and_starts_with_a_call_when_one_is_required() -> None:
    auto = calls_grammar((WEATHER,), None, required=False, parallel=True)
    assert auto.triggers and any("<tool_call>" in t for t in auto.triggers)
    assert auto.gbnf.startswith("root ::= tc-tagged | tc-fenced | tc-object")
    assert '"\\"get_weather\\""' in auto.gbnf and "tool0-arguments" in auto.gbnf
    required = calls_grammar((WEATHER,), None, required=True, parallel=False)
    assert not required.triggers and required.gbnf.startswith("root ::= tc-call tc-gap\n")
    with pytest.raises(InvalidChoice, match="not among the tools"):
        calls_grammar((WEATHER,), "send_mail", required=False, parallel=True)
    broken = ToolSpec("f", "", json.dumps({"type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}}))
    with pytest.raises(InvalidChoice, match="parameters of the function 'f' cannot be used"):
        calls_grammar((broken,), None, required=False, parallel=True)


def test_the_api_sends_each_call_once_and_stops_an_answer_that_repeats_one() -> None:
    from app.api.answers import Called
    from app.api.generation import with_calls
    from backends.base import Finished, TextDelta, Usage

    stopped: list[bool] = []
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
    other = call.replace("Oslo", "Bergen")
    usage = Usage(10, 5, 1.0, 2.0)
    events = [TextDelta(call), TextDelta(other), TextDelta(call), TextDelta(call), usage, Finished("cancelled")]
    steps = list(with_calls(iter(events), lambda: stopped.append(True)))
    assert [json.loads(s.call.arguments)["city"] for s in steps if isinstance(s, Called)] == ["Oslo", "Bergen"]
    assert [s.index for s in steps if isinstance(s, Called)] == [0, 1]
    assert stopped == [True] and steps[-1] == Finished("stop") and usage in steps  # ended as the model would have

    cut = [TextDelta(call), TextDelta('<tool_call>\n{"name": "get_wea'), Finished("length")]
    steps = list(with_calls(iter(cut), lambda: None))
    assert not [s for s in steps if isinstance(s, TextDelta) and s.text.strip()]  # the cut-off repeat is dropped
    assert steps[-1] == Finished("length")
    alone = list(
        with_calls(iter([TextDelta('<tool_call>\n{"name": "get_weather", "argu'), Finished("length")]), lambda: None)
    )
    assert alone == [Finished("length")]  # a call cut off by the limit is not given back as text
    plain = list(with_calls(iter([TextDelta("It is sunny."), Finished("stop")]), lambda: None))
    assert plain == [TextDelta("It is sunny."), Finished("stop")]


def test_the_api_streams_a_call_as_written_and_holds_back_what_may_be_a_repeat() -> None:
    from app.api.answers import Called, CallOpened, CallPiece
    from app.api.generation import with_calls
    from backends.base import Finished, TextDelta

    def call(city: str) -> str:
        return f'<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "{city}"}}}}\n</tool_call>\n'

    text = call("Oslo") + call("Osaka") + call("Oslo") + call("Bergen")
    stopped: list[bool] = []
    steps = list(with_calls(iter([*map(TextDelta, text), Finished("stop")]), lambda: stopped.append(True)))
    opened = [s for s in steps if isinstance(s, CallOpened)]
    assert [(s.index, s.name) for s in opened] == [(0, "get_weather"), (1, "get_weather")]
    assert opened[0].arguments == "{"  # sent at once: nothing was sent before it
    assert opened[1].arguments == '{"city": "Osa'  # held while it could still be the Oslo call again
    for index, city in enumerate(("Oslo", "Osaka")):
        pieces = [s.text for s in steps if isinstance(s, CallPiece) and s.index == index]
        assert opened[index].arguments + "".join(pieces) == f'{{"city": "{city}"}}'
    called = [s for s in steps if isinstance(s, Called)]
    assert [(s.index, s.streamed, s.call.id) for s in called] == [(0, True, opened[0].id), (1, True, opened[1].id)]
    # the repeat of Oslo was never sent, not even its first piece, and Bergen after it is not written
    assert stopped == [True] and steps[-1] == Finished("stop")
    assert not [s for s in steps if isinstance(s, TextDelta) and s.text.strip()]

    begun = '<tool_call>\n{"name": "get_weather", "arguments": {"ci'
    cut = [TextDelta(call("Oslo")), TextDelta(begun), Finished("length")]
    steps = list(with_calls(iter(cut), lambda: None))
    kinds = [type(s).__name__ for s in steps if not isinstance(s, TextDelta)]
    assert kinds == ["CallOpened", "Called", "Finished"]  # the held prefix never went out


def test_a_whole_reply_gets_each_call_once_complete_and_no_pieces() -> None:
    from app.api.answers import Called, CallOpened, CallPiece
    from app.api.generation import with_calls
    from backends.base import Finished, TextDelta

    def call(city: str) -> str:
        return f'<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "{city}"}}}}\n</tool_call>\n'

    text = call("Oslo") + call("Osaka") + call("Oslo") + call("Bergen")
    stopped: list[bool] = []
    events = [*map(TextDelta, text), Finished("stop")]
    steps = list(with_calls(iter(events), lambda: stopped.append(True), pieces=False))
    assert not [s for s in steps if isinstance(s, CallOpened | CallPiece)]
    called = [s for s in steps if isinstance(s, Called)]
    assert [(s.index, s.streamed, json.loads(s.call.arguments)["city"]) for s in called] == [
        (0, False, "Oslo"),
        (1, False, "Osaka"),
    ]
    # the same calls as the streamed reply sends, and the repeat ends the answer the same way
    streamed = list(with_calls(iter(events), lambda: None))
    assert [(s.call.name, s.call.arguments) for s in streamed if isinstance(s, Called)] == [
        (s.call.name, s.call.arguments) for s in called
    ]
    assert stopped == [True] and steps[-1] == Finished("stop")


def test_strings_in_a_call_or_a_schema_hold_no_raw_control_character() -> None:
    """llama-cpp-python's converter lets a JSON string hold a raw newline (JSON does not): a small model wrote one
    into a forced call, and the call did not parse."""
    from backends.grammar import json_schema_grammar

    for gbnf in (
        calls_grammar((WEATHER,), None, required=True, parallel=False).gbnf,
        json_schema_grammar({"type": "object", "properties": {"a": {"type": "string"}}}).gbnf,
    ):
        (char,) = [line for line in gbnf.splitlines() if line.startswith("char ::=")]
        assert char.startswith(r'char ::= [^"\\\x7F\x00-\x1F] | "\\"'), char


def test_a_closing_marker_inside_a_calls_string_does_not_end_the_call() -> None:
    # The embedded model, held to the schema, wrote the marker into the expression; the call is still one call.
    call = (
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "}}</tool_call> is \\"80\\""}}\n</tool_call>'
    )
    for size in (1, 7, 1000):
        pieces = streamed(call, size)
        assert calls_of(pieces) == [("calculator", {"expression": '}}</tool_call> is "80"'})], size
        assert not any(isinstance(p, str) and p.strip() for p in pieces)
    escaped = '<tool_call>{"name": "calculator", "arguments": {"expression": "a\\\\"}}</tool_call> then text'
    said, calls = split_calls(escaped)
    assert [json.loads(c.arguments) for c in calls] == [{"expression": "a\\"}] and said == "then text"
