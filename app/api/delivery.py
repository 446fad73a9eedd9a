"""Deliver an answer job over HTTP: one JSON reply, or a stream of server-sent events.

Nothing is sent until the answer has started (the model is held and the prompt fits), so "busy", "not ready",
"unknown model" and "too long" get their real status codes even on streaming requests. From then on a failure
can only travel inside the stream, as an ``{"error": ...}`` event (OpenAI's clients raise it). Both ways watch
for the client going away and cancel the answer, which frees its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from app.api.answers import AnswerJob, Called, CallOpened, CallPiece, Checked, Failed, Started
from app.api.errors import reply_for
from app.api.responses import (
    AnswerMeta,
    Extension,
    Kind,
    answer_json,
    call_chunk_json,
    call_piece_json,
    chunk_json,
    usage_chunk_json,
)
from app.api.sse import DONE, sse_event
from backends.base import Finished, TextDelta, ToolCall, Usage
from models.shared.errors import HearthError

log = logging.getLogger(__name__)
T = TypeVar("T")

# Status for a reply nobody will read (nginx's "client closed request"); it only shows in logs.
CLIENT_GONE = 499


class ClientGone(Exception):
    """The client disconnected before the reply was ready."""


def error_response(exc: BaseException) -> JSONResponse:
    reply = reply_for(exc)
    if not isinstance(exc, HearthError):
        log.error("the API failed on an unexpected error", exc_info=exc)
    return JSONResponse(reply.body(), status_code=reply.status, headers=reply.headers())


async def until_disconnect(receive: Receive) -> None:
    """Returns when the client is gone. Call only after the request body was read."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_gone(work: Awaitable[T], receive: Receive) -> T:
    """``work``'s result, or :class:`ClientGone` as soon as the client disconnects."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(until_disconnect(receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        raise ClientGone
    finally:
        for pending in (task, watcher):
            pending.cancel()
        for pending in (task, watcher):
            with contextlib.suppress(BaseException):
                await pending


async def deliver(job: AnswerJob, request: Request, kind: Kind, stream: bool, include_usage: bool) -> Response:
    job.start()
    try:
        first = await unless_gone(job.next(), request.receive)
        if isinstance(first, Failed):
            return error_response(first.error)
        if not isinstance(first, Started):
            raise RuntimeError(f"an answer began with {first!r} instead of Started")
        meta = AnswerMeta.new(kind, first.model)
        if stream:
            return EventStream(_events(job, meta, first.extension, include_usage), on_gone=job.cancel)
        return await unless_gone(_whole(job, meta, first.extension), request.receive)
    except ClientGone:
        job.cancel()
        return Response(status_code=CLIENT_GONE)
    except BaseException:
        job.cancel()
        raise


async def _whole(job: AnswerJob, meta: AnswerMeta, extension: Extension) -> Response:
    texts: list[str] = []
    calls: list[ToolCall] = []
    while (event := await job.next()) is not None:
        if isinstance(event, Failed):
            return error_response(event.error)
        if isinstance(event, TextDelta):
            texts.append(event.text)
        elif isinstance(event, Called):
            calls.append(event.call)
        elif isinstance(event, Checked):  # the reply's message is the answer as kept
            texts = [event.answer.text]
            extension = dataclasses.replace(extension, corrections=event.answer.notes)
        else:  # a call's pieces are passed over: the whole call comes as Called
            extension = _noted(extension, event)
    text = "".join(texts)
    return JSONResponse(answer_json(meta, text.strip() if calls else text, extension, tuple(calls)))


async def _events(job: AnswerJob, meta: AnswerMeta, extension: Extension, include_usage: bool) -> AsyncIterator[bytes]:
    # The first chunk names the role (chat) before any text, as OpenAI's stream does.
    if meta.kind == "chat":
        yield sse_event(chunk_json(meta, "", first=True))
    called = False
    while (event := await job.next()) is not None:
        if isinstance(event, Failed):
            yield sse_event(error_response_body(event.error))
            return  # no [DONE]: the answer did not complete
        if isinstance(event, TextDelta):
            if event.text:
                yield sse_event(chunk_json(meta, event.text))
        elif isinstance(event, CallOpened):
            called = True
            opened = ToolCall(event.id, event.name, event.arguments)
            yield sse_event(call_chunk_json(meta, opened, event.index))
        elif isinstance(event, CallPiece):
            yield sse_event(call_piece_json(meta, event.index, event.text))
        elif isinstance(event, Called):
            called = True
            if not event.streamed:  # read whole at its end (a bare or fenced call): it goes in one delta
                yield sse_event(call_chunk_json(meta, event.call, event.index))
        elif isinstance(event, Checked):  # the text is out already: the answer as kept goes in the last chunk
            extension = dataclasses.replace(extension, answer=event.answer.text, corrections=event.answer.notes)
        else:
            extension = _noted(extension, event)
    last = chunk_json(meta, None, extension.finish or "stop", called=called)
    if include_usage:
        yield sse_event(last)
        last = usage_chunk_json(meta, extension)
    yield sse_event(last | {"hearth": extension.to_json()})
    yield DONE


def error_response_body(exc: BaseException) -> dict[str, Any]:
    if not isinstance(exc, HearthError):
        log.error("an answer failed on an unexpected error", exc_info=exc)
    return reply_for(exc).body()


def _noted(extension: Extension, event: object) -> Extension:
    if isinstance(event, Usage):
        return dataclasses.replace(extension, usage=event)
    if isinstance(event, Finished):
        return dataclasses.replace(extension, finish=event.reason)
    return extension


class EventStream(StreamingResponse):
    """``text/event-stream`` that stops, and calls ``on_gone``, the moment the client disconnects: the answer
    is cancelled even while no token is being sent (a long prompt being read, a wait for a slot)."""

    def __init__(self, events: AsyncIterator[bytes], on_gone: Callable[[], None]) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(events, media_type="text/event-stream", headers=headers)
        self._events = events  # typed, unlike the base class's body_iterator
        self._on_gone = on_gone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        pump = asyncio.ensure_future(self._pump(send))
        watcher = asyncio.ensure_future(until_disconnect(receive))
        try:
            await asyncio.wait({pump, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not pump.done():
                self._on_gone()
        finally:
            for task in (pump, watcher):
                task.cancel()
            for task in (pump, watcher):
                with contextlib.suppress(BaseException):
                    await task

    async def _pump(self, send: Send) -> None:
        try:
            async for chunk in self._events:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            self._on_gone()  # the server noticed the broken connection first
