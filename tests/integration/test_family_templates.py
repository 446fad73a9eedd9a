"""The curated hub models' template families (tests/chat_families.py) through Hearth's sandboxed renderer and the real
llama.cpp: each renders in its own format without falling back to ChatML; a template that refuses a system message
gets it at the head of the first question; Qwen3's switch asks for no thinking; an answer's thinking never reaches
the person; and the calls Llama 3.x and Phi-4-mini write come back as calls through the real engine (the embedded
model, its template replaced, made to write each family's form by a grammar)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.base import (
    CancelToken,
    ChatEvent,
    ChatMessage,
    GenerationParams,
    Grammar,
    LoadOptions,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from backends.chat_template import build_formatter
from backends.llamacpp.backend import LlamaCppBackend
from backends.tool_calls import calls_in, template_family
from models.gguf import read_model_info
from tests.chat_families import FAMILIES, GEMMA2, GEMMA3, LLAMA3, PHI4_MINI, QWEN3, THINKS_ALWAYS
from tests.helpers import QWEN25_CODER_05B, assembled_model, copy_gguf_with_chat_template

pytestmark = pytest.mark.integration

SYSTEM = ChatMessage("system", "Answer in one short sentence.")
QUESTION = ChatMessage("user", "Where is Oslo?")
WEATHER = ToolSpec(
    "get_weather",
    "Current weather in a city",
    json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
)


@pytest.fixture(scope="module")
def with_template(
    embedded_model: Path, tmp_path_factory: pytest.TempPathFactory, llama_cpp_installed: None
) -> Iterator[object]:
    """The embedded model loaded with a template, once per template in this file (answers do not change it)."""
    folder = tmp_path_factory.mktemp("families")
    loaded: dict[str, LlamaCppBackend] = {}

    def load(template: str) -> LlamaCppBackend:
        if template in loaded:
            return loaded[template]
        path = copy_gguf_with_chat_template(embedded_model, folder / f"family-{len(loaded)}.gguf", template)
        backend = loaded[template] = LlamaCppBackend()
        list(backend.load(read_model_info(path), LoadOptions(context_length=512, threads=2, seed=1)))
        assert not backend.notes, backend.notes  # the template held up: no ChatML fallback
        return backend

    yield load
    for backend in loaded.values():
        backend.close()


def forced(text: str) -> GenerationParams:
    """Greedy, with a grammar that makes the model write exactly ``text`` (then end)."""
    return GenerationParams(temperature=0.0, max_new_tokens=64, grammar=Grammar(f"root ::= {json.dumps(text)}"))


def text_of(events: list[ChatEvent | ToolCall]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_renders_its_own_format_with_and_without_a_system_message(family: str) -> None:
    with build_formatter(FAMILIES[family], "<bos>", "<eos>") as formatter:
        assert formatter.fallback_reason is None, formatter.fallback_reason
        prompt = formatter.render_chat([SYSTEM, QUESTION])
        assert SYSTEM.content in prompt and QUESTION.content in prompt
        assert formatter.folds_system is (family == "gemma2")
        with_tools = formatter.render_chat([SYSTEM, QUESTION], (WEATHER,))
        assert '"get_weather"' in with_tools and QUESTION.content in with_tools
    opening = {
        "llama3": "<|start_header_id|>assistant<|end_header_id|>\n\n",
        "qwen3": "<|im_start|>assistant\n<think>\n\n</think>\n\n",  # the switch: no thinking asked for
        "thinks-always": "<|im_start|>assistant\n<think>\n",
        "gemma2": "<start_of_turn>model\n",
        "gemma3": "<start_of_turn>model\n",
        "phi4-mini": "<|assistant|>",
    }[family]
    assert prompt.endswith(opening)


def test_the_makers_own_template_in_a_real_model_file_renders_tools_itself_without_a_fallback() -> None:
    """Qwen2.5's template as its maker publishes it, read from a test model's GGUF file (the Gemma 3 test model's
    file carries no template)."""
    info = read_model_info(assembled_model(QWEN25_CODER_05B))
    assert info.chat_template and template_family(info.chat_template) == "native"
    with build_formatter(info.chat_template, "", "<|im_end|>") as formatter:
        assert formatter.fallback_reason is None and not formatter.folds_system
        prompt = formatter.render_chat([SYSTEM, QUESTION])
        with_tools = formatter.render_chat([SYSTEM, QUESTION], (WEATHER,))
    assert f"<|im_start|>system\n{SYSTEM.content}" in prompt and prompt.endswith("<|im_start|>assistant\n")
    assert "<tools>" in with_tools and '"get_weather"' in with_tools and "<tool_call>" in with_tools


def test_a_template_that_refuses_a_system_message_gets_it_at_the_head_of_the_first_question() -> None:
    answer = ChatMessage("assistant", "In Norway.")
    with build_formatter(GEMMA2, "<bos>", "<eos>") as folded, build_formatter(GEMMA3, "<bos>", "<eos>") as own:
        prompt = folded.render_chat([SYSTEM, QUESTION, answer, ChatMessage("user", "And Bergen?")])
        assert prompt == (
            "<bos><start_of_turn>user\nAnswer in one short sentence.\n\nWhere is Oslo?<end_of_turn>\n"
            "<start_of_turn>model\nIn Norway.<end_of_turn>\n<start_of_turn>user\nAnd Bergen?<end_of_turn>\n"
            "<start_of_turn>model\n"
        )
        assert own.render_chat([SYSTEM, QUESTION]) == folded.render_chat([SYSTEM, QUESTION])  # as Gemma 3 does it


def test_qwen3_offers_the_tools_itself_and_reads_earlier_answers_without_their_thinking() -> None:
    with build_formatter(QWEN3, "", "<|im_end|>") as formatter:
        prompt = formatter.render_chat([SYSTEM, QUESTION], (WEATHER,))
        assert "# Functions you may call" in prompt  # the template's own tools section, not Hearth's written one
        earlier = ChatMessage("assistant", "<think>\nHmm.\n</think>\n\nIn Norway.")
        again = formatter.render_chat([QUESTION, earlier, ChatMessage("user", "And Bergen?")])
        assert "In Norway." in again and "Hmm." not in again


@pytest.mark.parametrize(
    ("template", "written"),
    [
        (QWEN3, "<think>\nOslo is a city. Norway.\n</think>\n\nOslo is in Norway."),  # thinking despite the switch
        (THINKS_ALWAYS, "Oslo is a city. Norway.\n</think>\n\nOslo is in Norway."),  # the prompt opened it
    ],
)
def test_the_thinking_never_reaches_the_answer(with_template, template: str, written: str) -> None:  # type: ignore[no-untyped-def]
    backend = with_template(template)
    events = list(backend.stream_chat([SYSTEM, QUESTION], forced(written), CancelToken()))
    assert text_of(events) == "Oslo is in Norway."


@pytest.mark.parametrize(
    ("template", "written", "calls"),
    [
        (LLAMA3, '{"name": "get_weather", "parameters": {"city": "Oslo"}}', ["Oslo"]),
        (
            LLAMA3,
            '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}; '
            '{"name": "get_weather", "parameters": {"city": "Bergen"}}',
            ["Oslo", "Bergen"],
        ),
        (PHI4_MINI, 'functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}]', ["Oslo"]),
        (QWEN3, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>', ["Oslo"]),
    ],
)
def test_each_familys_written_calls_come_back_as_calls_through_llama_cpp(  # type: ignore[no-untyped-def]
    with_template, template: str, written: str, calls: list[str]
) -> None:
    backend = with_template(template)
    params = forced(written)
    params = GenerationParams(temperature=0.0, max_new_tokens=64, grammar=params.grammar, tools=(WEATHER,))
    events = list(calls_in(backend.stream_chat([SYSTEM, ChatMessage("user", "Weather?")], params, CancelToken())))
    made = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, json.loads(c.arguments)["city"]) for c in made] == [("get_weather", city) for city in calls]
    assert not text_of(events).strip()
