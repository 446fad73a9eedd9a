"""The OpenAI-compatible API against a real `hearth ui` with the real embedded model, driven by the official
`openai` client and LangChain's ChatOpenAI, as developers use it: chat, completions, embeddings, models, a
collection's answer with its sources, and the errors clients must be able to tell apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import RunningApp, free_port
from tests.helpers import MemoryGuard, require

pytestmark = pytest.mark.e2e

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
COLLECTION = "Coast"
QUESTION = "Name three colours of the rainbow."


@dataclass(frozen=True)
class Api:
    base_url: str
    key: str
    model: str
    pid: int  # hearth ui's


def hearth(args: list[str], home: Path, **options: Any) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"HEARTH_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "app", *args], env=env, capture_output=True, text=True, **options)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, embedded_model: Path) -> Iterator[Api]:
    """One real Hearth for the module: a collection made with `hearth ingest`, then `hearth ui`."""
    home = tmp_path_factory.mktemp("api-e2e") / "home"
    ingest = hearth(["ingest", str(CORPUS / "lighthouse-history.md"), "--collection", COLLECTION], home, timeout=600)
    assert ingest.returncode == 0, ingest.stderr
    port = free_port()
    log = home.parent / "ui.log"
    env = os.environ | {"HEARTH_HOME": str(home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "ui", "--port", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        key = wait_until_serving(process, log, port, home)
        yield Api(f"http://127.0.0.1:{port}/v1", key, wait_for_model(port, key), process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def wait_until_serving(process: subprocess.Popen[bytes], log: Path, port: int, home: Path) -> str:
    deadline = time.monotonic() + 120
    while "Hearth is running at" not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, f"hearth ui did not start:\n{log.read_text()}"
        time.sleep(0.2)
    assert f"OpenAI-compatible API at http://127.0.0.1:{port}/v1" in log.read_text()
    printed = hearth(["api-key"], home, timeout=60)
    assert printed.returncode == 0, printed.stderr
    return printed.stdout.strip()


def wait_for_model(port: int, key: str) -> str:
    """The chat model's id, once it is loaded (until then only the collection and the embedder are listed)."""
    deadline = time.monotonic() + 180
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        while time.monotonic() < deadline:
            listed = client.get(f"http://127.0.0.1:{port}/v1/models").json()["data"]
            chat = [m["id"] for m in listed if m["hearth"]["kind"] == "chat"]
            if chat:
                return str(chat[0])
            time.sleep(0.5)
    raise AssertionError("the model never finished loading")


@pytest.fixture(scope="module")
def openai_module() -> Any:
    try:
        import openai
    except ImportError:
        require(False, "the openai package", "pip install -e '.[dev]'")
        raise
    return openai


@pytest.fixture
def client(api: Api, openai_module: Any) -> Any:
    return openai_module.OpenAI(base_url=api.base_url, api_key=api.key, max_retries=0)


def test_models_list_the_chat_model_the_collection_and_the_embedder(client: Any, api: Api) -> None:
    ids = [model.id for model in client.models.list()]
    assert api.model == "SmolLM2-135M-Instruct.Q4_1"
    assert ids == [api.model, f"hearth:{COLLECTION}", "all-MiniLM-L6-v2"]
    assert client.models.retrieve("hearth").id == api.model


def test_chat_streamed_and_not_writes_the_same_greedy_answer(client: Any, api: Api) -> None:
    asked = {"messages": [{"role": "user", "content": QUESTION}], "temperature": 0, "max_tokens": 40, "seed": 1}
    whole = client.chat.completions.create(model="hearth", **asked)
    text = whole.choices[0].message.content
    assert text.strip()
    assert whole.model == api.model and whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage.prompt_tokens > 5 and 0 < whole.usage.completion_tokens <= 40
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens

    chunks = list(
        client.chat.completions.create(model=api.model, stream=True, stream_options={"include_usage": True}, **asked)
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text  # nothing lost or repeated between the engine and the client
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason


def test_parallel_streams_are_written_together_and_each_matches_its_own_prompt(client: Any) -> None:
    """Four streamed requests at once on the real model: all four are under way before any ends (the engine
    writes them together), and each answer is exactly what its question gets when asked alone."""
    # Long answers, so each runs to max_tokens and none can end before the last one has begun.
    questions = [
        "Write a long story about a lighthouse keeper.",
        "Write a long essay about the history of bread.",
        "Describe in detail how a bicycle works.",
        "Write a long poem about the sea at night.",
    ]
    asked = {"temperature": 0, "max_tokens": 48, "seed": 1}
    first_at: dict[int, float] = {}
    last_at: dict[int, float] = {}
    together: dict[int, str] = {}

    def ask(index: int) -> None:
        stream = client.chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": questions[index]}], stream=True, **asked
        )
        pieces = []
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                first_at.setdefault(index, time.monotonic())
                pieces.append(chunk.choices[0].delta.content)
        last_at[index] = time.monotonic()
        together[index] = "".join(pieces)

    threads = [threading.Thread(target=ask, args=(index,)) for index in range(len(questions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert sorted(together) == list(range(len(questions)))
    assert max(first_at.values()) < min(last_at.values()), "the answers were written one after the other"
    for index, question in enumerate(questions):
        alone = client.chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": question}], **asked
        )
        assert together[index] == alone.choices[0].message.content, question


def test_completions_streamed_and_not(client: Any) -> None:
    prompt = "The capital of France is"
    whole = client.completions.create(model="hearth", prompt=prompt, max_tokens=8, temperature=0)
    assert whole.choices[0].text.strip()
    streamed = client.completions.create(model="hearth", prompt=prompt, max_tokens=8, temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in streamed) == whole.choices[0].text


def test_embeddings(client: Any) -> None:
    # The client asks for base64 unless told otherwise, and decodes it itself.
    packed = client.embeddings.create(model="all-MiniLM-L6-v2", input=["a lighthouse", "a sourdough loaf"])
    floats = client.embeddings.create(model="all-MiniLM-L6-v2", input="a lighthouse", encoding_format="float")
    assert [len(row.embedding) for row in packed.data] == [384, 384]
    assert packed.data[0].embedding == pytest.approx(floats.data[0].embedding, abs=1e-5)


def test_a_collection_answer_carries_its_sources(client: Any) -> None:
    question = [{"role": "user", "content": "Who designed the Skerry lighthouse?"}]
    reply = client.chat.completions.create(
        model=f"hearth:{COLLECTION}", messages=question, temperature=0, max_tokens=48
    )
    assert reply.choices[0].message.content.strip()
    sources = reply.model_extra["hearth"]["sources"]
    assert sources[0]["number"] == 1 and sources[0]["file"] == "lighthouse-history.md"
    assert any("Alan Brody" in s["text"] for s in sources)

    stream = client.chat.completions.create(
        model="hearth", messages=question, stream=True, max_tokens=16, extra_body={"hearth": {"collection": COLLECTION}}
    )
    last = list(stream)[-1]
    assert last.model_extra["hearth"]["sources"][0]["file"] == "lighthouse-history.md"


def test_a_follow_up_reads_the_earlier_turn_from_the_cache_and_numbers_run_on(client: Any) -> None:
    first = [{"role": "user", "content": "Who designed the Skerry lighthouse?"}]
    asked = {"model": f"hearth:{COLLECTION}", "temperature": 0, "max_tokens": 32}
    reply = client.chat.completions.create(messages=first, **asked)
    answer = reply.choices[0].message.content
    # As clients send it: the earlier turns as they were asked and answered, without the passages Hearth added.
    history = [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "When was it first lit?"}]
    follow = client.chat.completions.create(messages=history, **asked)
    read_before = reply.usage.prompt_tokens + reply.usage.completion_tokens
    cached = follow.usage.prompt_tokens_details.cached_tokens
    assert cached >= 0.9 * read_before, (cached, reply.usage, follow.usage)
    shown = {s["text"]: s["number"] for s in reply.model_extra["hearth"]["sources"]}
    for source in follow.model_extra["hearth"]["sources"]:
        assert source["number"] == shown.get(source["text"], source["number"])
        assert source["text"] in shown or source["number"] > max(shown.values())


def test_errors_clients_can_tell_apart(api: Api, openai_module: Any) -> None:
    wrong = openai_module.OpenAI(base_url=api.base_url, api_key="hearth-wrong-key-0000000000000000", max_retries=0)
    with pytest.raises(openai_module.AuthenticationError) as unauthorized:
        wrong.models.list()
    assert "hearth api-key" in str(unauthorized.value)
    right = openai_module.OpenAI(base_url=api.base_url, api_key=api.key, max_retries=0)
    with pytest.raises(openai_module.NotFoundError) as unknown:
        right.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert api.model in str(unknown.value)  # the message lists the ids that work
    with pytest.raises(openai_module.BadRequestError):
        right.chat.completions.create(model="hearth", messages=[{"role": "user", "content": "hi"}], max_tokens=0)
    with pytest.raises(openai_module.APIStatusError) as too_long:
        right.chat.completions.create(model="hearth", messages=[{"role": "user", "content": "word " * 20_000}])
    assert too_long.value.status_code == 413


def test_structured_output_follows_the_schema_through_the_openai_clients_parse(client: Any) -> None:
    """The embedded 135M model is far too small to keep to JSON on its own; the grammar holds every answer to it."""
    from pydantic import BaseModel

    class Lighthouse(BaseModel):
        name: str
        built: int
        staffed: bool

    asked = [{"role": "user", "content": "Describe the Skerry lighthouse as JSON."}]
    parsed = client.chat.completions.parse(
        model="hearth", messages=asked, response_format=Lighthouse, temperature=0, max_tokens=120
    )
    choice = parsed.choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(choice.message.parsed, Lighthouse)  # parse() validated the text against the model
    assert Lighthouse.model_validate_json(choice.message.content) == choice.message.parsed
    schema = {"name": "lighthouse", "schema": Lighthouse.model_json_schema(), "strict": True}
    streamed = client.chat.completions.create(
        model="hearth",
        messages=asked,
        response_format={"type": "json_schema", "json_schema": schema},
        temperature=0,
        max_tokens=120,
        stream=True,
    )
    chunks = [chunk for chunk in streamed if chunk.choices]
    assert chunks[-1].choices[0].finish_reason == "stop"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert Lighthouse.model_validate_json(text) == choice.message.parsed  # greedy: the same answer, streamed
    france = [{"role": "user", "content": "Give the largest city of France and its population as JSON."}]
    anything = client.chat.completions.create(
        model="hearth", messages=france, response_format={"type": "json_object"}, temperature=0, max_tokens=200
    )
    assert anything.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(anything.choices[0].message.content), dict)


def test_structured_output_is_refused_for_answers_from_documents(client: Any, openai_module: Any) -> None:
    with pytest.raises(openai_module.BadRequestError) as refused:
        client.chat.completions.create(
            model=f"hearth:{COLLECTION}",
            messages=[{"role": "user", "content": "Who built it?"}],
            response_format={"type": "json_object"},
        )
    assert "response_format applies to plain chat" in str(refused.value)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Oslo?"}]


def test_a_required_tool_call_comes_back_valid_for_its_schema_whole_and_streamed(client: Any) -> None:
    """The embedded 135M model knows nothing of tools; the grammar still holds its call to the schema."""
    whole = client.chat.completions.create(
        model="hearth", messages=ASK_WEATHER, tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=300
    )
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function" and call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)
    assert set(arguments) == {"city", "unit"} and arguments["unit"] in ("celsius", "fahrenheit")

    named: dict[str, Any] = {
        "model": "hearth",
        "messages": ASK_WEATHER,
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False,
        "temperature": 0,
        "max_tokens": 80,
    }
    chunks = list(client.chat.completions.create(stream=True, **named))
    # The same request whole, right after: greedy, with the same prompt cached as for the stream (the first request
    # of a run reads its prompt cold, and a near tie between two enum values can then fall the other way).
    [call] = client.chat.completions.create(**named).choices[0].message.tool_calls
    arguments = json.loads(call.function.arguments)
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert {len(d) for d in deltas} == {1} and {d[0].index for d in deltas} == {0}  # one call
    opened = deltas[0][0]
    assert opened.id.startswith("call_") and opened.function.name == "get_weather"
    assert len(deltas) > 1 and not any(d[0].id or d[0].function.name for d in deltas[1:])  # arguments as written
    joined = "".join(d[0].function.arguments or "" for d in deltas)
    assert json.loads(joined) == arguments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_the_result_of_a_call_is_read_back_and_answered(client: Any) -> None:
    called = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    history = [
        *ASK_WEATHER,
        {"role": "assistant", "content": None, "tool_calls": [called]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": "4 C", "sky": "rain"}'},
    ]
    for choice in ("none", "auto"):
        reply = client.chat.completions.create(
            model="hearth", messages=history, tools=[WEATHER], tool_choice=choice, temperature=0, max_tokens=60
        )
        answer = reply.choices[0]
        if answer.finish_reason == "tool_calls":  # auto: the model may call again; the call is valid then
            assert choice == "auto"
            assert all(set(json.loads(c.function.arguments)) == {"city", "unit"} for c in answer.message.tool_calls)
        else:
            assert answer.message.content and not answer.message.tool_calls
    # The result is in the prompt the model read: a longer result makes a longer prompt, by about its length.
    longer = [*history[:-1], {**history[-1], "content": '{"temperature": "4 C", "sky": "rain"' + ', "x": 1' * 20 + "}"}]
    read = client.chat.completions.create(
        model="hearth", messages=longer, tools=[WEATHER], tool_choice="auto", temperature=0, max_tokens=1
    )
    assert read.usage.prompt_tokens >= reply.usage.prompt_tokens + 40


def test_langchain_binds_tools_and_runs_a_minimal_agent_loop(api: Api) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    asked: list[str] = []

    @tool
    def get_weather(city: str, unit: str) -> str:
        """The current weather in a city, in celsius or fahrenheit."""
        asked.append(city)
        return f"4 degrees {unit} and rain in {city}"

    llm = ChatOpenAI(
        base_url=api.base_url, api_key=api.key, model="hearth", temperature=0, max_tokens=80, max_retries=0
    )
    messages: list[Any] = [HumanMessage("What is the weather in Oslo?")]
    first = llm.bind_tools([get_weather], tool_choice="get_weather").invoke(messages)
    assert first.tool_calls and first.tool_calls[0]["name"] == "get_weather"
    # streamed, LangChain joins the call's pieces into the same kind of call
    pieces = list(llm.bind_tools([get_weather], tool_choice="get_weather").stream(messages))
    joined = pieces[0]
    for piece in pieces[1:]:
        joined += piece
    assert len([p for p in pieces if p.tool_call_chunks]) > 1  # the arguments came as they were written
    [streamed] = joined.tool_calls
    assert streamed["name"] == "get_weather" and set(streamed["args"]) == {"city", "unit"}
    messages.append(first)
    for call in first.tool_calls:
        messages.append(ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"]))
    assert len(asked) == len(first.tool_calls) >= 1  # the arguments fitted the tool's own schema
    final = llm.bind_tools([get_weather], tool_choice="none").invoke(messages)
    assert isinstance(final.content, str) and final.content.strip() and not final.tool_calls


def test_langchain_chat_openai(api: Api) -> None:
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:
        require(False, "langchain-openai", "pip install -e '.[dev]'")
        raise
    llm = ChatOpenAI(
        base_url=api.base_url, api_key=api.key, model="hearth", temperature=0, max_tokens=32, max_retries=0
    )
    message = llm.invoke(QUESTION)
    assert isinstance(message.content, str) and message.content.strip()
    assert message.usage_metadata is not None and message.usage_metadata["output_tokens"] > 0
    streamed = "".join(str(chunk.content) for chunk in llm.stream(QUESTION))
    assert streamed == message.content


def test_the_hardware_tab_shows_the_address_the_key_and_an_example(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = start_app("--backend", "fake")
    page = open_page(app)
    page.get_by_role("tab", name="Hardware").click()
    page.click("#api-accordion button")
    page.locator("#api-address", has_text="/v1").wait_for(timeout=15_000)
    assert f"{app.url}v1" in page.inner_text("#api-address")
    assert page.locator("#api-key input").get_attribute("type") == "password"
    page.click("#api-reveal")
    # Revealed, the box is a plain text field (Gradio draws it as a textarea).
    shown = page.locator("#api-key textarea")
    shown.wait_for(timeout=15_000)
    key = shown.input_value()
    assert key.startswith("hearth-")
    assert key == hearth(["api-key"], app.home, timeout=60).stdout.strip()
    page.locator("#api-example", has_text=key).wait_for(timeout=15_000)
    assert "OpenAI(base_url=" in page.inner_text("#api-example")
    assert "hearth api-key" not in page.inner_text("#api-address")  # the page speaks of its own controls

    # Replace key asks first; Keep it changes nothing, Yes replaces it and shows the new one.
    page.click("#api-replace")
    page.click("#api-replace-no")
    expect(page.locator("#api-replace-confirm")).to_be_hidden()
    assert hearth(["api-key"], app.home, timeout=60).stdout.strip() == key
    page.click("#api-replace")
    page.click("#api-replace-yes")
    page.wait_for_function(
        f"document.querySelector('#api-key textarea') && document.querySelector('#api-key textarea').value !== {key!r}",
        timeout=15_000,
    )
    new = page.locator("#api-key textarea").input_value()
    assert new.startswith("hearth-") and new != key
    assert new == hearth(["api-key"], app.home, timeout=60).stdout.strip()
    with httpx.Client(base_url=app.url) as client:
        assert client.get("/v1/models", headers={"Authorization": f"Bearer {key}"}).status_code == 401
        assert client.get("/v1/models", headers={"Authorization": f"Bearer {new}"}).status_code == 200
    expect(page.locator("#api-replace-confirm")).to_be_hidden()
    assert app.remote_requests == []


HUGE_COUNT = 1_000_000_000
GUARD_BYTES = 500 * 1024 * 1024


def _post_chat(api: Api, body: dict[str, Any], timeout_s: float = 120) -> httpx.Response:
    return httpx.post(
        f"{api.base_url}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {api.key}"},
        timeout=timeout_s,
    )


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "f", "parameters": {"type": "string", "minLength": HUGE_COUNT}},
                    }
                ],
                "tool_choice": "required",
            },
            "tools[0].function.parameters.minLength",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "x",
                        "schema": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 20_000_000}}},
                    },
                }
            },
            "response_format.json_schema.schema.properties.a.maxLength",
        ),
    ],
)
def test_a_tiny_schema_asking_for_a_huge_grammar_is_refused_with_its_field_and_memory_stays_flat(
    api: Api, extra: dict[str, Any], param: str
) -> None:
    body = {"model": "hearth", "messages": [{"role": "user", "content": "hi"}], **extra}
    assert len(json.dumps(body)) < 400  # a request of a few hundred bytes
    with MemoryGuard(api.pid, GUARD_BYTES) as guard:
        reply = _post_chat(api, body, timeout_s=60)
    assert not guard.killed, f"hearth ui grew by {guard.grew_bytes:,} bytes"
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param
    assert "above 2,000" in error["message"]


def test_tool_schemas_over_their_total_are_refused_by_name(api: Api) -> None:
    from app.api.schemas import MAX_TOOLS_SCHEMA_CHARS

    padding = "p" * 1_000
    properties = {f"field{i}": {"type": "string", "description": padding} for i in range(20)}
    tool = {"type": "object", "properties": properties}
    tools = [{"type": "function", "function": {"name": f"tool{i}", "parameters": tool}} for i in range(8)]
    assert len(json.dumps(tools)) > MAX_TOOLS_SCHEMA_CHARS
    reply = _post_chat(api, {"model": "hearth", "messages": [{"role": "user", "content": "hi"}], "tools": tools})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "tools" and "parameter schemas reach 64,000 characters at 'tool3'" in error["message"]


def test_call_arguments_nested_deep_in_the_history_are_answered_and_the_engine_serves_on(api: Api, client: Any) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    history = [
        {"role": "user", "content": "What is in the box?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "look", "arguments": deep}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a red ball"},
    ]
    reply = _post_chat(api, {"model": "hearth", "messages": history, "max_tokens": 4}, timeout_s=120)
    # read as the text it is (400,000 characters): answered, as too long for the context, never left hanging
    assert reply.status_code == 413, reply.text
    assert "RecursionError" not in reply.text
    again = client.chat.completions.create(model="hearth", messages=[{"role": "user", "content": "Hi."}], max_tokens=4)
    assert again.choices[0].finish_reason in ("stop", "length")
