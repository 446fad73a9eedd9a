"""Server-sent events: the framing OpenAI clients parse, every token exactly once, and cancellation that frees
the model (the answer's generator is closed) when the reader goes away."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from app.api.answers import AnswerJob, Checked, Started, Step
from app.api.delivery import _events, _whole
from app.api.responses import AnswerMeta, Extension
from app.api.sse import DONE, sse_event
from app.services.answering.documents_turn import FinalAnswer
from backends.base import CancelToken, Finished, TextDelta, Usage
from models.shared.errors import EngineStopped
from rag.citations import Moved
from rag.prompt import Source

T = TypeVar("T")

# Tokens that break naive framing: line separators str.splitlines() honours, SSE's own markers, emoji, CR/LF.
TRICKY = ["Hello", " wor", "ld\u2028", "\u0085next", "\r\n", "data: [DONE]", "\n\n", " 🔥", "é", ""]


def parse(stream: bytes) -> list[Any]:
    """As the openai client reads a stream: events end at a blank line, lines split with str.splitlines()."""
    events: list[Any] = []
    for block in stream.split(b"\n\n"):
        for line in block.decode().splitlines():
            assert line.startswith("data: "), line
            payload = line.removeprefix("data: ")
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def test_an_event_is_one_ascii_line() -> None:
    event = sse_event({"text": "".join(TRICKY)})
    assert event.isascii() and event.endswith(b"\n\n") and event.count(b"\n") == 2
    assert parse(event) == [{"text": "".join(TRICKY)}]


def run_isolated(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a thread of its own: a test that ran before (Playwright's sync API) may have left an
    event loop running on this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def run_stream(work: Any, include_usage: bool, kind: str = "chat") -> tuple[bytes, AnswerJob]:
    async def main() -> tuple[bytes, AnswerJob]:
        job = AnswerJob(work, asyncio.get_running_loop()).start()
        first = await job.next()
        assert isinstance(first, Started)
        meta = AnswerMeta.new(kind, first.model)  # type: ignore[arg-type]
        chunks = [chunk async for chunk in _events(job, meta, first.extension, include_usage)]
        return b"".join(chunks), job

    return run_isolated(main())


def answer(extension: Extension | None = None) -> Any:
    def work(cancel: CancelToken) -> Generator[Step, None, None]:
        yield Started("model-a", extension or Extension())
        for text in TRICKY:
            yield TextDelta(text)
        yield Usage(7, len(TRICKY), 1.0, 2.0)
        yield Finished("length")

    return work


def test_every_token_arrives_once_in_order() -> None:
    stream, _ = run_stream(answer(), include_usage=False)
    events = parse(stream)
    assert events[-1] == "[DONE]" and stream.endswith(DONE)
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    texts = [c["choices"][0]["delta"].get("content", "") for c in chunks]
    assert "".join(texts) == "".join(TRICKY)
    assert texts[1:-1] == [t for t in TRICKY if t]  # one chunk per token, none empty, none merged
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "length" and last["choices"][0]["delta"] == {}
    assert last["hearth"]["timings"]["total_ms"] == 2.0
    assert {c["id"] for c in chunks} == {chunks[0]["id"]} and chunks[0]["object"] == "chat.completion.chunk"
    assert all("usage" not in c for c in chunks)


def test_usage_comes_last_when_asked_for_with_the_sources() -> None:
    source = Source(1, "/docs/lighthouse.md", None, "Construction", "Alan Brody designed it.")
    stream, _ = run_stream(answer(Extension(collection="Coast", sources=(source,))), include_usage=True)
    chunks = parse(stream)[:-1]
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": len(TRICKY),
        "total_tokens": 7 + len(TRICKY),
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert usage["hearth"]["sources"] == [
        {
            "number": 1,
            "label": "lighthouse.md · Construction",
            "file": "lighthouse.md",
            "page": None,
            "section": "Construction",
            "text": "Alan Brody designed it.",
        }
    ]
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"


def checked_answer(cancel: CancelToken) -> Generator[Step, None, None]:
    """An answer from documents whose citation the check moved: as written, then as kept."""
    sources = (
        Source(1, "/docs/lighthouse.md", None, "Keepers", "Ada Brann kept the light."),
        Source(2, "/docs/lighthouse.md", None, "Construction", "Alan Brody designed it."),
    )
    yield Started("hearth:coast", Extension(collection="Coast", sources=sources))
    yield TextDelta("Alan Brody designed it [1].")
    yield Usage(7, 6, 1.0, 2.0)
    yield Finished("stop")
    moved = Moved(1, 2, ("alan", "brody"))
    yield Checked(FinalAnswer("Alan Brody designed it [2].", None, (moved,)))


def test_a_streamed_answer_from_documents_ends_with_the_answer_as_kept() -> None:
    stream, _ = run_stream(checked_answer, include_usage=False)
    chunks = parse(stream)[:-1]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Alan Brody designed it [1]."
    closing = chunks[-1]["hearth"]
    assert closing["answer"] == "Alan Brody designed it [2]."
    assert closing["corrections"] == [
        "Citation corrected: the answer cites [1], but it is passage [2] that says “alan”, “brody”."
    ]


def test_a_whole_answer_from_documents_is_the_answer_as_kept() -> None:
    async def main() -> Any:
        job = AnswerJob(checked_answer, asyncio.get_running_loop()).start()
        first = await job.next()
        assert isinstance(first, Started)
        reply = await _whole(job, AnswerMeta.new("chat", first.model), first.extension)
        return json.loads(bytes(reply.body))

    body = run_isolated(main())
    assert body["choices"][0]["message"]["content"] == "Alan Brody designed it [2]."
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "answer" not in body["hearth"]  # the message is the answer as kept
    assert body["hearth"]["corrections"][0].startswith("Citation corrected: the answer cites [1]")


CALLED = (
    'Looking.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}\n</tool_call>'
    '\n{"name": "f"}'
)


def called_answer(cancel: CancelToken) -> Generator[Step, None, None]:
    from app.api.generation import with_calls

    yield Started("model-a", Extension())
    yield from with_calls(iter([*map(TextDelta, CALLED), Finished("stop")]), cancel.cancel)


def test_a_call_streams_as_openai_streams_one_and_comes_whole_in_a_whole_reply() -> None:
    stream, _ = run_stream(called_answer, include_usage=False)
    chunks = parse(stream)[:-1]
    deltas = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if "tool_calls" in c["choices"][0]["delta"]]
    first, rest = deltas[0], deltas[1:]
    assert first["index"] == 0 and first["type"] == "function" and first["id"].startswith("call_")
    assert first["function"]["name"] == "get_weather"
    assert rest and all(set(d) == {"index", "function"} and set(d["function"]) == {"arguments"} for d in rest)
    joined = "".join(d["function"]["arguments"] for d in deltas)
    assert joined == '{"city": "Oslo", "unit": "celsius"}'  # as the model wrote it, piece by piece
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == 'Looking.\n{"name": "f"}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"

    async def main() -> Any:
        job = AnswerJob(called_answer, asyncio.get_running_loop()).start()
        started = await job.next()
        assert isinstance(started, Started)
        reply = await _whole(job, AnswerMeta.new("chat", started.model), started.extension)
        return json.loads(bytes(reply.body))

    choice = run_isolated(main())["choices"][0]
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": joined} and choice["finish_reason"] == "tool_calls"


def test_completions_stream_text_chunks() -> None:
    stream, _ = run_stream(answer(), include_usage=False, kind="completion")
    chunks = parse(stream)[:-1]
    assert chunks[0]["object"] == "text_completion"
    assert "".join(c["choices"][0]["text"] for c in chunks) == "".join(TRICKY)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_a_failure_mid_stream_is_an_error_event_without_done() -> None:
    def work(cancel: CancelToken) -> Generator[Step, None, None]:
        yield Started("model-a", Extension())
        yield TextDelta("partial")
        raise EngineStopped("The model stopped unexpectedly (killed); it is restarting.", "Send again in a moment.")

    stream, _ = run_stream(work, include_usage=True)
    events = parse(stream)
    assert "[DONE]" not in events
    assert events[1]["choices"][0]["delta"]["content"] == "partial"
    assert events[-1]["error"]["code"] == "engine_restarting"
    assert "restarting" in events[-1]["error"]["message"]


def test_cancelling_stops_the_engine_and_ends_the_lease() -> None:
    lease_released = threading.Event()
    produced: list[int] = []

    def tokens(cancel: CancelToken) -> Iterator[TextDelta]:
        for index in range(10_000):
            if cancel.cancelled:
                return
            produced.append(index)
            cancel_wait(cancel)
            yield TextDelta(f" t{index}")

    def work(cancel: CancelToken) -> Generator[Step, None, None]:
        try:
            yield Started("model-a", Extension())
            yield from tokens(cancel)
        finally:
            lease_released.set()

    async def main() -> None:
        job = AnswerJob(work, asyncio.get_running_loop()).start()
        assert isinstance(await job.next(), Started)
        assert isinstance(await job.next(), TextDelta)
        job.cancel()  # what the server does when the client disconnects
        while await job.next() is not None:
            pass

    run_isolated(main())
    assert lease_released.wait(10)
    assert len(produced) < 10_000


def cancel_wait(cancel: CancelToken) -> None:
    """A token takes a moment, as a real one does; a cancel cuts the wait short."""
    deadline = threading.Event()
    for _ in range(20):
        if cancel.cancelled or deadline.wait(0.005):
            return
