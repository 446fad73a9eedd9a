"""The OpenAI-compatible API on a real server (uvicorn, the page mounted beside it) with the fake backend in its
engine process: every endpoint, streamed and not, and every kind of bad input with its status and message."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration.api_support import Served, serve_hearth, sse_events

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def hearth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_hearth(tmp_path_factory.mktemp("api") / "home") as served:
        yield served


def error_of(response: Any, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code, error
    return str(error["message"])


def test_models_lists_the_loaded_model_and_the_embedder(hearth: Served) -> None:
    with hearth.client() as client:
        listed = client.get("/v1/models").json()
    by_id = {entry["id"]: entry for entry in listed["data"]}
    chat = by_id["home-tiny"]
    assert chat["object"] == "model" and chat["owned_by"] == "hearth"
    assert chat["hearth"]["kind"] == "chat"
    assert chat["hearth"]["aliases"][:2] == ["hearth", "home-tiny.gguf"]
    assert by_id["all-MiniLM-L6-v2"]["hearth"]["kind"] == "embedding"
    with hearth.client() as client:
        assert client.get("/v1/models/hearth").json()["id"] == "home-tiny"  # an alias finds the listed entry
        assert "home-tiny" in error_of(client.get("/v1/models/gpt-4o"), 404, "model_not_found")


@pytest.mark.parametrize("model", ["hearth", "home-tiny", "HOME-TINY", "home-tiny.gguf"])
def test_a_chat_answer_in_one_reply(hearth: Served, model: str) -> None:
    reply = hearth.chat({"model": model, "messages": HELLO, "temperature": 0, "seed": 3})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["object"] == "chat.completion" and body["model"] == "home-tiny"
    assert body["choices"] == [
        {
            "index": 0,
            "finish_reason": "stop",
            "logprobs": None,
            "message": {"role": "assistant", "content": "You said: hello there"},
        }
    ]
    usage = body["usage"]
    assert usage["completion_tokens"] == 4 and usage["total_tokens"] == usage["prompt_tokens"] + 4


def test_a_streamed_chat_answer(hearth: Served) -> None:
    body = {"messages": HELLO, "stream": True, "stream_options": {"include_usage": True}}
    reply = hearth.chat(body)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    events = sse_events(reply)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "You said: hello there"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 4


def test_the_answer_length_and_stop_strings(hearth: Served) -> None:
    short = hearth.chat({"messages": HELLO, "max_tokens": 2}).json()
    assert short["choices"][0]["message"]["content"] == "You said:"
    assert short["choices"][0]["finish_reason"] == "length"
    huge = hearth.chat({"messages": HELLO, "max_tokens": 10**9}).json()  # clamped to the context's room
    assert huge["choices"][0]["message"]["content"] == "You said: hello there"
    stopped = hearth.chat({"messages": HELLO, "stop": [" there", "never"]}).json()
    assert stopped["choices"][0]["message"]["content"] == "You said: hello"
    assert stopped["choices"][0]["finish_reason"] == "stop"


def test_a_conversation_with_a_system_prompt_answers_its_last_question(hearth: Served) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": [{"type": "text", "text": "second question"}]},
    ]
    assert hearth.chat({"messages": messages}).json()["choices"][0]["message"]["content"] == (
        "You said: second question"
    )


def test_completions_streamed_and_not(hearth: Served) -> None:
    with hearth.client() as client:
        whole = client.post("/v1/completions", json={"model": "hearth", "prompt": "once upon a time"}).json()
        assert whole["object"] == "text_completion"
        assert whole["choices"][0]["text"] == "once upon a time"
        streamed = client.post(
            "/v1/completions",
            json={"model": "home-tiny", "prompt": "once upon a time", "stream": True, "max_tokens": 3},
        )
    chunks = sse_events(streamed)[:-1]
    assert "".join(c["choices"][0]["text"] for c in chunks) == "once upon a"
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_embeddings_as_floats_and_base64(hearth: Served) -> None:
    texts = ["The lighthouse keeper lit the lamp.", "Sourdough needs a starter."]
    with hearth.client() as client:
        floats = client.post("/v1/embeddings", json={"model": "all-MiniLM-L6-v2", "input": texts}).json()
        packed = client.post(
            "/v1/embeddings", json={"model": "all-minilm-l6-v2", "input": texts[0], "encoding_format": "base64"}
        ).json()
        wrong = client.post("/v1/embeddings", json={"model": "text-embedding-3-small", "input": "x"})
    assert [row["index"] for row in floats["data"]] == [0, 1]
    vectors = np.array([row["embedding"] for row in floats["data"]], dtype=np.float32)
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert floats["usage"]["prompt_tokens"] > 10
    decoded = np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(decoded, vectors[0], atol=1e-5)
    assert "all-MiniLM-L6-v2" in error_of(wrong, 404, "model_not_found")


@pytest.mark.parametrize(
    ("body", "status", "code", "says"),
    [
        (b"{not json", 400, "invalid_json", "not valid JSON"),
        ({"model": "hearth"}, 400, "missing_field", "messages is required"),
        ({"model": "hearth", "messages": "hello"}, 400, "invalid_value", "messages"),
        ({"model": "hearth", "messages": [{"role": "robot", "content": "hi"}]}, 400, "invalid_value", "role"),
        ({"model": "hearth", "messages": [{"role": "user", "content": " "}]}, 400, "empty_prompt", "no user message"),
        ({"model": "hearth", "messages": HELLO, "max_tokens": 0}, 400, "invalid_value", "max_tokens"),
        ({"model": "hearth", "messages": HELLO, "temperature": "warm"}, 400, "invalid_value", "temperature"),
        ({"model": "gpt-4o", "messages": HELLO}, 404, "model_not_found", "home-tiny"),
        ({"model": "all-MiniLM-L6-v2", "messages": HELLO}, 404, "model_not_found", "/v1/embeddings"),
        ({"model": "hearth:No such shelf", "messages": HELLO}, 404, "model_not_found", "no such collection"),
        (
            {"model": "hearth", "messages": [{"role": "user", "content": "word " * 600}]},
            413,
            "context_length_exceeded",
            "context window",
        ),
    ],
)
def test_bad_chat_requests(hearth: Served, body: bytes | dict[str, Any], status: int, code: str, says: str) -> None:
    with hearth.client() as client:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        for stream in (False, True):  # a streamed request gets the same status: nothing is sent before it is known
            payload = raw if isinstance(body, bytes) else json.dumps({**body, "stream": stream}).encode()
            reply = client.post("/v1/chat/completions", content=payload, headers={"content-type": "application/json"})
            assert says in error_of(reply, status, code)
    # The server and the model are unaffected: the next request is answered.
    assert hearth.chat({"messages": HELLO}).status_code == 200


def test_a_megabyte_of_text_is_too_long(hearth: Served) -> None:
    megabyte = "lorem ipsum " * 87_500
    reply = hearth.chat({"messages": [{"role": "user", "content": megabyte}]})
    error_of(reply, 413, "context_length_exceeded")
    with hearth.client() as client:
        huge = client.post("/v1/completions", json={"model": "hearth", "prompt": megabyte * 5})
    assert "MiB" in error_of(huge, 413, "request_too_large")


def test_bad_completion_and_endpoint_requests(hearth: Served) -> None:
    with hearth.client() as client:
        empty = client.post("/v1/completions", json={"model": "hearth", "prompt": ""})
        assert "prompt is empty" in error_of(empty, 400, "empty_prompt")
        collection = client.post("/v1/completions", json={"model": "hearth:Coast", "prompt": "x"})
        assert "/v1/chat/completions" in error_of(collection, 400, "invalid_value")
        wrong_method = client.get("/v1/chat/completions")
        assert "POST /v1/chat/completions" in error_of(wrong_method, 404, "unknown_endpoint")
        assert error_of(client.post("/v1/responses", json={}), 404, "unknown_endpoint")


def test_an_answer_from_a_collection_carries_its_sources(hearth: Served) -> None:
    documents = hearth.services.documents.get()
    list(documents.ingestor.ingest([CORPUS / "lighthouse-history.md", CORPUS / "sourdough.html"], "Coast notes"))
    question = [{"role": "user", "content": "Who designed the Skerry lighthouse?"}]
    with hearth.client() as client:
        listed = [m["id"] for m in client.get("/v1/models").json()["data"]]
    assert "hearth:Coast notes" in listed

    reply = hearth.chat({"model": "hearth:Coast notes", "messages": question})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["model"] == "hearth:Coast notes"
    sources = body["hearth"]["sources"]
    assert sources[0]["number"] == 1 and sources[0]["file"] == "lighthouse-history.md"
    assert "Alan Brody" in " ".join(s["text"] for s in sources)
    assert {"number", "label", "file", "page", "section", "text"} <= set(sources[0])
    # The fake model echoes what it was asked (the numbered passages, then the question) until its room runs out.
    answer = body["choices"][0]["message"]["content"]
    assert answer.startswith("You said: Passages: [1] ") and "Question:" in answer
    # The echo puts marker [2] after passage 1's last sentence: the check moves it to the passage that says that,
    # as the page would, and says so.
    assert "in 1852 after six summers of work, because storms stopped all building in winter. [1] Keepers" in answer
    assert body["hearth"]["corrections"] == [
        "Citation corrected: the answer cites [2], but it is passage [1] that says “1852”, “after”, “alan”."
    ]
    as_written = "".join(
        c["choices"][0]["delta"].get("content", "")
        for c in sse_events(hearth.chat({"model": "hearth:Coast notes", "messages": question, "stream": True}))[:-1]
    )
    assert "winter. [2] Keepers" in as_written  # a stream sends the text as written…
    closing = sse_events(hearth.chat({"model": "hearth:Coast notes", "messages": question, "stream": True}))[-2]
    assert closing["hearth"]["answer"] == answer  # …and ends with the answer as checked

    streamed = hearth.chat({"messages": question, "hearth": {"collection": "Coast notes", "top_k": 1}, "stream": True})
    chunks = sse_events(streamed)[:-1]
    assert [s["file"] for s in chunks[-1]["hearth"]["sources"]] == ["lighthouse-history.md"]
    assert chunks[-1]["hearth"]["collection"] == "Coast notes"
