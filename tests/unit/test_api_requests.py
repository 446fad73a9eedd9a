"""Requests as the API reads them: validation messages, the engine's messages and parameters, and model ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.api.errors import RequestInvalid, UnknownModel
from app.api.ids import chat_model_ids, requested_collection, unknown_model
from app.api.prompting import chat_messages, completion_prompt, fit_answer, requested_params, split_question
from app.api.schemas import ChatRequest, CompletionRequest, EmbeddingRequest, parse_request
from backends.base import ChatMessage, GenerationParams
from models.shared.errors import ContextTooLong, EmptyMessage

USER = {"role": "user", "content": "hi"}


def chat(**fields: Any) -> ChatRequest:
    return parse_request(ChatRequest, json.dumps({"model": "hearth", "messages": [USER], **fields}).encode())


def refused(body: bytes | dict[str, Any], model: type[Any] = ChatRequest) -> RequestInvalid:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(RequestInvalid) as caught:
        parse_request(model, raw)
    return caught.value


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        (b"{not json", None, "not valid JSON"),
        (b"", None, "not valid JSON"),
        (b"[1, 2]", None, "must be a JSON object"),
        ({"model": "hearth"}, "messages", "messages is required"),
        ({"messages": [USER]}, "model", "model is required"),
        ({"model": "hearth", "messages": []}, "messages", "at least 1"),
        ({"model": "hearth", "messages": "hi"}, "messages", "valid array"),
        ({"model": "hearth", "messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "'user'"),
        ({"model": "hearth", "messages": [{"role": "user", "content": 5}]}, "messages[0].content", "string"),
        ({"model": "hearth", "messages": [USER], "temperature": "hot"}, "temperature", "number"),
        ({"model": "hearth", "messages": [USER], "temperature": 3}, "temperature", "less than or equal to 2"),
        ({"model": "hearth", "messages": [USER], "max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
        ({"model": "hearth", "messages": [USER], "max_tokens": -5}, "max_tokens", "greater than or equal to 1"),
        ({"model": "hearth", "messages": [USER], "n": 2}, "n", "less than or equal to 1"),
        ({"model": "hearth", "messages": [USER], "stop": ["x"] * 40}, "stop", "at most 16"),
        ({"model": "hearth", "messages": [USER], "tools": [{"type": "function"}]}, "tools[0].function", "required"),
        ({"model": "hearth", "messages": [USER], "functions": [{"name": "f"}]}, None, "send the same definitions"),
        ({"model": "hearth", "messages": [{"role": "tool", "content": "4"}]}, "messages[0]", "needs tool_call_id"),
    ],
)
def test_bad_chat_requests_name_the_field_and_the_problem(body: bytes | dict[str, Any], param: str, says: str) -> None:
    error = refused(body)
    assert error.param == param
    assert says in error.message
    assert error.remedy


def test_image_parts_are_refused_with_a_reason() -> None:
    content = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "x"}}]
    error = refused({"model": "hearth", "messages": [{"role": "user", "content": content}]})
    assert "only text and file parts" in error.message
    assert error.param == "messages[0].content"


def test_file_parts_and_hearth_attachments_are_read_in_order() -> None:
    part = {"type": "file", "file": {"filename": "a.pdf", "file_data": "QQ=="}}
    request = chat(
        messages=[{"role": "user", "content": [{"type": "text", "text": "why?"}, part]}],
        hearth={"attachments": [{"filename": "b.txt", "file_data": "Qg=="}]},
    )
    assert [f.filename for f in request.files] == ["a.pdf", "b.txt"]
    assert request.messages[0].text == "why?"
    too_many = [part] * 21
    error = refused({"model": "hearth", "messages": [{"role": "user", "content": too_many}]})
    assert "at most 20 files" in error.message


def test_sent_files_are_decoded_and_named_without_folders() -> None:
    from app.api.attachments import decode_files
    from app.api.errors import RequestInvalid
    from app.api.schemas import AttachedFile

    files = decode_files(
        [
            AttachedFile(filename="../../etc/notes.txt", file_data="data:text/plain;base64,aGk="),
            AttachedFile(filename="C:\\Users\\me\\r.md", file_data="aGk="),
        ]
    )
    assert [(f.name, f.data) for f in files] == [("notes.txt", b"hi"), ("r.md", b"hi")]
    with pytest.raises(RequestInvalid, match="not base64"):
        decode_files([AttachedFile(filename="x.txt", file_data="%%%")])


def test_text_parts_and_the_developer_role_are_read() -> None:
    request = chat(
        messages=[
            {"role": "developer", "content": "Be brief."},
            {"role": "system", "content": "Answer in English."},
            {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]},
        ]
    )
    assert chat_messages(request.messages) == [
        ChatMessage("system", "Be brief.\n\nAnswer in English."),
        ChatMessage("user", "Hello there"),
    ]


def test_unknown_fields_are_ignored() -> None:
    assert chat(user="me", presence_penalty=0.5, logit_bias={}).model == "hearth"


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "system", "content": "You help."}],
        [{"role": "user", "content": "   "}],
        [{"role": "user", "content": None}, {"role": "assistant", "content": "hello"}],
        [{"role": "user", "content": []}],
    ],
)
def test_no_user_text_is_an_empty_message(messages: list[dict[str, Any]]) -> None:
    with pytest.raises(EmptyMessage, match="no user message"):
        chat_messages(chat(messages=messages).messages)


def test_an_empty_prompt_is_refused() -> None:
    request = parse_request(CompletionRequest, b'{"model": "hearth", "prompt": "  "}')
    with pytest.raises(EmptyMessage, match="prompt is empty"):
        completion_prompt(request)


def test_completions_take_one_prompt() -> None:
    assert refused({"model": "hearth", "prompt": ["a", "b"]}, CompletionRequest).param == "prompt"
    single = parse_request(CompletionRequest, b'{"model": "hearth", "prompt": ["once"]}')
    assert completion_prompt(single) == "once"


def test_parameters_override_the_defaults_and_stop_may_be_a_string_or_a_list() -> None:
    defaults = GenerationParams(temperature=0.7, max_new_tokens=512, top_p=0.95, seed=None, repeat_penalty=1.1)
    params = requested_params(defaults, chat(temperature=0, top_p=0, max_tokens=20, seed=-1, stop="END"))
    assert (params.temperature, params.max_new_tokens, params.stop, params.repeat_penalty) == (0, 20, ("END",), 1.1)
    assert 0 < params.top_p < 0.01  # an exact 0 is nudged up: "only the likeliest token"
    assert params.seed == 2**32 - 1  # llama.cpp seeds are 32-bit; -1 wraps like C would
    assert requested_params(defaults, chat(stop=["a", "", "b"])).stop == ("a", "b")
    assert requested_params(defaults, chat()) == defaults


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    defaults = GenerationParams()
    assert requested_params(defaults, chat(max_tokens=10, max_completion_tokens=30)).max_new_tokens == 30


def test_a_huge_max_tokens_is_clamped_to_what_the_context_leaves() -> None:
    params = requested_params(GenerationParams(), chat(max_tokens=10**9))
    assert fit_answer(params, prompt_tokens=1000, context_length=4096).max_new_tokens == 3096
    assert fit_answer(params, prompt_tokens=4095, context_length=4096).max_new_tokens == 1


def test_a_prompt_that_fills_the_context_is_too_long() -> None:
    with pytest.raises(ContextTooLong, match="4096"):
        fit_answer(GenerationParams(), prompt_tokens=4096, context_length=4096)


def test_the_question_is_the_last_user_message() -> None:
    messages = [
        ChatMessage("system", "sys"),
        ChatMessage("user", "first"),
        ChatMessage("assistant", "answer"),
        ChatMessage("user", "second"),
    ]
    assert split_question(messages) == ("sys", messages[1:3], [], "second")


def test_embedding_inputs() -> None:
    request = parse_request(EmbeddingRequest, b'{"model": "m", "input": "one"}')
    assert (request.texts, request.encoding_format) == (["one"], "float")
    assert refused({"model": "m", "input": []}, EmbeddingRequest).param == "input"
    assert refused({"model": "m", "input": [1, 2, 3]}, EmbeddingRequest).param.startswith("input")
    assert "besides spaces" in refused({"model": "m", "input": ["a", " "]}, EmbeddingRequest).message
    assert refused({"model": "m", "input": "a", "encoding_format": "hex"}, EmbeddingRequest).param == (
        "encoding_format"
    )


def test_the_loaded_model_answers_to_its_stem_its_file_name_its_catalog_id_and_hearth() -> None:
    ids = chat_model_ids(Path("/m/SmolLM2-135M-Instruct.Q4_1.gguf"), "b179c9523d0e")
    assert ids.primary == "SmolLM2-135M-Instruct.Q4_1"
    for name in (
        "SmolLM2-135M-Instruct.Q4_1",
        "smollm2-135m-instruct.q4_1",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e",
        "hearth",
        "HEARTH",
    ):
        assert ids.names(name), name
    assert not ids.names("gpt-4o")
    assert not ids.names("b179c9")
    assert not chat_model_ids(Path("/m/x.gguf"), None).names("b179c9523d0e")


@pytest.mark.parametrize(
    ("model", "extension", "expected"),
    [
        ("hearth", None, None),
        ("hearth:Work notes", None, "Work notes"),
        ("Hearth:Work notes", None, "Work notes"),
        ("hearth", "Work notes", "Work notes"),
        ("hearth:Work notes", "Work  notes", "Work notes"),
        ("hearth", "  ", None),
    ],
)
def test_a_collection_is_named_by_the_model_id_or_the_extension(
    model: str, extension: str | None, expected: str | None
) -> None:
    assert requested_collection(model, extension) == expected


def test_two_different_collections_or_none_after_the_prefix_are_refused() -> None:
    with pytest.raises(RequestInvalid, match=r"hearth\.collection"):
        requested_collection("hearth:a", "b")
    with pytest.raises(RequestInvalid, match="names no collection"):
        requested_collection("hearth:", None)


def test_an_unknown_model_lists_what_there_is() -> None:
    error = unknown_model("gpt-4o", ["SmolLM2", "hearth:Garden"])
    assert isinstance(error, UnknownModel)
    assert "gpt-4o" in error.message and "SmolLM2, hearth:Garden" in error.message
    assert "/v1/models" in error.remedy
    many = unknown_model("x", [f"hearth:c{i}" for i in range(30)])
    assert "and 18 more" in many.message


def test_an_adapter_is_named_after_the_model_id() -> None:
    from app.api.ids import adapter_id, split_adapter

    assert split_adapter("hearth+support-tone") == ("hearth", "support-tone")
    assert split_adapter("SmolLM2-135M-Instruct.Q4_1+faq") == ("SmolLM2-135M-Instruct.Q4_1", "faq")
    assert split_adapter("hearth") == ("hearth", None)
    assert adapter_id("SmolLM2-135M-Instruct.Q4_1", "faq") == "SmolLM2-135M-Instruct.Q4_1+faq"
    for empty in ("hearth+", "+faq", " + "):
        with pytest.raises(RequestInvalid, match="names no"):
            split_adapter(empty)


CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
}


def test_response_format_asks_for_a_grammar_of_json_or_of_the_schema() -> None:
    from app.api.prompting import output_grammar

    assert output_grammar(chat()) is None
    assert output_grammar(chat(response_format={"type": "text"})) is None
    anything = output_grammar(chat(response_format={"type": "json_object"}))
    assert anything is not None and anything.gbnf.startswith("root   ::= object")
    fitted = requested_params(
        GenerationParams(),
        chat(response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": CITY, "strict": True}}),
    ).grammar
    assert fitted is not None and fitted.root == "root"
    assert '"\\"city\\""' in fitted.gbnf and '"\\"population\\""' in fitted.gbnf  # both keys, in the schema's order


def test_a_response_format_hearth_cannot_follow_is_refused_with_the_reason() -> None:
    from app.api.prompting import output_grammar
    from backends.grammar import MAX_SCHEMA_CHARS
    from models.shared.errors import InvalidChoice

    error = refused({"model": "hearth", "messages": [USER], "response_format": {"type": "json_schema"}})
    assert error.param == "response_format" and "needs the json_schema field" in error.message
    error = refused({"model": "hearth", "messages": [USER], "response_format": {"type": "xml"}})
    assert error.param == "response_format.type"
    huge = {"type": "object", "description": "x" * MAX_SCHEMA_CHARS}
    with pytest.raises(InvalidChoice, match="characters long"):
        output_grammar(chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": huge}}))
    broken = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    with pytest.raises(InvalidChoice, match="cannot be used"):
        output_grammar(chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": broken}}))


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_tool_calls_and_results_in_the_history_are_read_back() -> None:
    from backends.base import ToolCall

    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    request = chat(
        messages=[
            USER,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 4}'},
        ],
        tools=[WEATHER_TOOL],
    )
    assert chat_messages(request.messages) == [
        ChatMessage("user", "hi"),
        ChatMessage("assistant", "", (ToolCall("call_1", "get_weather", '{"city": "Oslo"}'),)),
        ChatMessage("tool", '{"temp": 4}', tool_call_id="call_1"),
    ]


def test_tool_choice_decides_what_the_model_is_offered_and_held_to() -> None:
    auto = requested_params(GenerationParams(), chat(tools=[WEATHER_TOOL]))
    assert [t.name for t in auto.tools] == ["get_weather"] and auto.grammar is not None and auto.grammar.triggers
    required = requested_params(GenerationParams(), chat(tools=[WEATHER_TOOL], tool_choice="required"))
    assert required.grammar is not None and not required.grammar.triggers
    named = {"type": "function", "function": {"name": "get_weather"}}
    forced = requested_params(GenerationParams(), chat(tools=[WEATHER_TOOL], tool_choice=named))
    assert forced.grammar is not None and not forced.grammar.triggers
    single = requested_params(GenerationParams(), chat(tools=[WEATHER_TOOL], parallel_tool_calls=False))
    assert single.grammar is not None and "(tc-gap tc-call)*" not in single.grammar.gbnf
    none = requested_params(GenerationParams(), chat(tools=[WEATHER_TOOL], tool_choice="none"))
    assert none.tools == () and none.grammar is None


def test_tool_requests_hearth_cannot_follow_are_refused_by_field() -> None:
    base = {"model": "hearth", "messages": [USER]}
    named = {"type": "function", "function": {"name": "send_mail"}}
    error = refused(base | {"tools": [WEATHER_TOOL], "tool_choice": named})
    assert "'send_mail', which is not among the tools" in error.message
    error = refused(base | {"tools": [WEATHER_TOOL], "response_format": {"type": "json_object"}})
    assert "tools or response_format, not both" in error.message
    bad_name = {"type": "function", "function": {"name": "get weather!"}}
    assert refused(base | {"tools": [bad_name]}).param == "tools[0].function.name"
    assert "at most 128" in refused(base | {"tools": [WEATHER_TOOL] * 129}).message
    call = {"id": "c", "function": {"name": "get_weather"}}
    error = refused(base | {"messages": [{"role": "user", "content": "hi", "tool_calls": [call]}]})
    assert "only assistant messages carry tool_calls" in error.message
