"""The API under load and when clients leave: a slow fake model in this process, so a test can watch the
answers. 50 requests at once get answers or 429 with Retry-After, each answer matches its own question, a client
that disconnects mid-answer stops its generation and frees its place, and a model that is not loaded yet is 503."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from backends.base import CancelToken, ChatEvent, ChatMessage, GenerationParams, TextDelta
from backends.fake import FakeBackend
from tests.helpers import local_engines
from tests.integration.api_support import Served, serve_hearth, sse_events

pytestmark = pytest.mark.integration

TOKEN_DELAY_S = 0.02
REQUESTS_AT_ONCE = 50


class WatchedFake(FakeBackend):
    """The fake model, slowed down, counting the tokens of each answer and noting when one stops early."""

    def __init__(self) -> None:
        super().__init__(token_delay_s=TOKEN_DELAY_S)
        self.stopped_after: list[int] = []

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        produced = 0
        try:
            for event in super().stream_chat(messages, params, cancel):
                produced += isinstance(event, TextDelta)
                yield event
        finally:
            self.stopped_after.append(produced)


@pytest.fixture
def watched() -> WatchedFake:
    return WatchedFake()


@pytest.fixture
def hearth(tmp_path: Path, watched: WatchedFake) -> Iterator[Served]:
    with serve_hearth(
        tmp_path / "home", make_engine=local_engines(lambda: watched), model={"context_length": 2048}
    ) as s:
        yield s


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def long_question(words: int = 300) -> list[dict[str, str]]:
    return [{"role": "user", "content": " ".join(f"w{i}" for i in range(words))}]


def test_a_client_that_leaves_mid_stream_stops_its_answer(hearth: Served, watched: WatchedFake) -> None:
    body = {"model": "hearth", "messages": long_question(), "stream": True}
    with hearth.client() as client, client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        received = 0
        for line in response.iter_lines():
            received += line.startswith("data: ")
            if received == 3:
                break  # leaving the block closes the connection mid-answer
    wait_for(lambda: bool(watched.stopped_after), "the answer to stop")
    assert watched.stopped_after[0] < 300  # it did not write the whole answer for nobody
    wait_for(lambda: hearth.services.runtime.status.answers == 0, "the lease to be released")
    assert (
        hearth.chat({"messages": [{"role": "user", "content": "still here?"}]}).json()["choices"][0]["message"][
            "content"
        ]
        == "You said: still here?"
    )


def test_a_client_that_gives_up_on_a_whole_answer_stops_it_too(hearth: Served, watched: WatchedFake) -> None:
    with hearth.client() as client, pytest.raises(httpx.ReadTimeout):
        client.post("/v1/chat/completions", json={"model": "hearth", "messages": long_question()}, timeout=0.5)
    wait_for(lambda: bool(watched.stopped_after), "the answer to stop")
    assert watched.stopped_after[0] < 300
    wait_for(lambda: hearth.services.runtime.status.answers == 0, "the lease to be released")


def test_fifty_requests_at_once_are_answered_or_told_to_retry(hearth: Served) -> None:
    start = threading.Barrier(REQUESTS_AT_ONCE)

    def ask(number: int) -> tuple[int, httpx.Response]:
        question = f"question {number} " + "padding " * 60
        with hearth.client() as client:
            start.wait()
            return number, client.post(
                "/v1/chat/completions",
                json={"model": "hearth", "messages": [{"role": "user", "content": question}]},
            )

    with ThreadPoolExecutor(REQUESTS_AT_ONCE) as pool:
        results = list(pool.map(ask, range(REQUESTS_AT_ONCE)))
    answered = [(n, r) for n, r in results if r.status_code == 200]
    refused = [r for _, r in results if r.status_code != 200]
    assert answered and refused, [r.status_code for _, r in results]
    for number, reply in answered:  # each answer is its own question's, not a neighbour's
        assert reply.json()["choices"][0]["message"]["content"] == f"You said: question {number} " + " ".join(
            ["padding"] * 60
        )
    for reply in refused:
        assert reply.status_code == 429
        assert int(reply.headers["Retry-After"]) >= 1
        error = reply.json()["error"]
        assert error["code"] == "busy" and "Try again" in error["message"]
    wait_for(lambda: hearth.services.runtime.status.answers == 0, "every lease to be released")
    assert hearth.chat({"messages": [{"role": "user", "content": "after the rush"}]}).status_code == 200


def test_parallel_streams_each_get_their_own_answer(hearth: Served) -> None:
    def stream(number: int) -> str:
        body = {"messages": [{"role": "user", "content": f"stream {number} " + "x " * 20}], "stream": True}
        events = sse_events(hearth.chat(body))
        return "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1] if e["choices"])

    with ThreadPoolExecutor(4) as pool:
        texts = list(pool.map(stream, range(4)))
    assert texts == [f"You said: stream {n} " + " ".join(["x"] * 20) for n in range(4)]


def test_before_the_model_is_loaded_requests_are_503_with_retry_after(tmp_path: Path) -> None:
    with serve_hearth(tmp_path / "home", make_engine=local_engines(FakeBackend), load=False) as hearth:
        reply = hearth.chat({"messages": [{"role": "user", "content": "hello"}], "stream": True})
        assert reply.status_code == 503
        assert int(reply.headers["Retry-After"]) >= 1
        assert reply.json()["error"]["code"] == "model_not_ready"
        list(hearth.services.runtime.load(hearth.services.model_choice()))
        assert hearth.chat({"messages": [{"role": "user", "content": "hello"}]}).status_code == 200
