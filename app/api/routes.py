"""The ``/v1`` endpoints. Each validates its request (400 before anything else happens), then hands the work to
``generation`` on a thread of its own and the reply to ``delivery``."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from app.api.answers import AnswerJob
from app.api.attachments import decode_files
from app.api.delivery import deliver, error_response
from app.api.directory import ModelDirectory
from app.api.embedding_jobs import EmbeddingJobs
from app.api.errors import RequestInvalid, UnknownEndpoint
from app.api.generation import ChatJob, chat_work, completion_work
from app.api.ids import COLLECTION_PREFIX, requested_collection
from app.api.prompting import chat_messages, completion_prompt, requested_params
from app.api.responses import embeddings_json, models_json
from app.api.schemas import ChatRequest, CompletionRequest, EmbeddingRequest, parse_request
from app.services.container import Services
from backends.base import CancelToken
from models.shared.errors import HearthError

ResultT = TypeVar("ResultT")
# How often a long request looks whether its client is still there.
DISCONNECT_POLL_S = 0.25

ENDPOINTS = (
    "GET|HEAD /v1/models, GET /v1/models/ID, POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings"
)


def build_router(services: Services, jobs: EmbeddingJobs | None = None) -> APIRouter:
    directory = ModelDirectory(services)
    embedding_jobs = jobs or EmbeddingJobs()
    router = APIRouter(prefix="/v1")

    @router.api_route("/models", methods=["GET", "HEAD"])  # HEAD: uvicorn sends the headers, not the body
    async def list_models() -> Response:
        try:
            entries = await anyio.to_thread.run_sync(directory.entries)
        except Exception as exc:
            return error_response(exc)
        return JSONResponse(models_json(entries))

    @router.get("/models/{model_id:path}")
    async def retrieve_model(model_id: str) -> Response:
        try:
            entry = await anyio.to_thread.run_sync(directory.entry, model_id)
        except Exception as exc:
            return error_response(exc)
        return JSONResponse(models_json([entry])["data"][0])

    @router.post("/chat/completions")
    async def chat_completions(request: Request) -> Response:
        body = await request.body()
        try:
            # on a thread: reading a large request and turning its schemas into grammars takes a while, and the
            # event loop serves every other request (and the page) meanwhile
            chat, job = await anyio.to_thread.run_sync(_read_chat, services, body)
        except HearthError as exc:
            return error_response(exc)
        work = chat_work(services, directory, job)
        answer = AnswerJob(work, asyncio.get_running_loop())
        return await deliver(answer, request, "chat", chat.stream, chat.include_usage)

    @router.post("/completions")
    async def completions(request: Request) -> Response:
        try:
            completion = parse_request(CompletionRequest, await request.body())
            if completion.model.casefold().startswith(COLLECTION_PREFIX):
                raise RequestInvalid(
                    "Collections answer chat requests only.",
                    "Send the question to /v1/chat/completions with this model id.",
                    param="model",
                )
            prompt = completion_prompt(completion)
            params = requested_params(services.generation_params(), completion)
        except HearthError as exc:
            return error_response(exc)
        work = completion_work(services, directory, completion.model, prompt, params)
        answer = AnswerJob(work, asyncio.get_running_loop())
        return await deliver(answer, request, "completion", completion.stream, completion.include_usage)

    @router.post("/embeddings")
    async def embeddings(request: Request) -> Response:
        try:
            wanted = parse_request(EmbeddingRequest, await request.body())
            with embedding_jobs.admitted() as cancel:
                work = functools.partial(_embed, directory, wanted, embedding_jobs, cancel)
                body = await run_while_connected(request, cancel, work)
        except Exception as exc:
            return error_response(exc)
        return JSONResponse(body)

    @router.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"])
    async def unknown(request: Request) -> Response:
        # Without this, unknown /v1 paths would fall through to the page mounted at "/".
        return error_response(
            UnknownEndpoint(
                f"There is no endpoint {request.method} {request.url.path}.",
                f"Hearth serves {ENDPOINTS}.",
            )
        )

    return router


def _read_chat(services: Services, body: bytes) -> tuple[ChatRequest, ChatJob]:
    chat = parse_request(ChatRequest, body)
    return chat, _chat_job(services, chat)


def _chat_job(services: Services, chat: ChatRequest) -> ChatJob:
    """What a chat request asks for, checked: grammars (tools, a response format) hold plain chat only."""
    extension = chat.hearth
    job = ChatJob(
        model=chat.model,
        messages=chat_messages(chat.messages),
        params=requested_params(services.generation_params(), chat),
        collection=requested_collection(chat.model, extension.collection if extension else None),
        top_k=(extension.top_k if extension else None) or services.settings.rag.top_k,
        files=tuple(decode_files(chat.files)),
        stream=chat.stream,
    )
    if job.params.grammar is not None and (job.collection is not None or job.files):
        asked = "tools" if job.params.tools else "response_format"
        raise RequestInvalid(
            f"{asked} applies to plain chat, not to answers from documents or files (their citations are "
            "checked and corrected in the text).",
            f"Leave out {asked}, or ask without hearth.collection and files.",
            param=asked,
        )
    return job


async def run_while_connected(request: Request, cancel: CancelToken, work: Callable[[], ResultT]) -> ResultT:
    """``work`` on a thread of its own; if the client leaves meanwhile, ``cancel`` is set (the work stops at its
    next check)."""

    async def watch() -> None:
        while not cancel.cancelled:
            if await request.is_disconnected():
                cancel.cancel()
                return
            await anyio.sleep(DISCONNECT_POLL_S)

    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            result = await anyio.to_thread.run_sync(work)
        except anyio.get_cancelled_exc_class():
            cancel.cancel()  # the server is shutting down: the work stops at its next check
            raise
        except Exception as exc:  # raised as itself below, not wrapped in the task group's ExceptionGroup
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


def _embed(
    directory: ModelDirectory, request: EmbeddingRequest, jobs: EmbeddingJobs, cancel: CancelToken
) -> dict[str, Any]:
    model = directory.check_embedder(request.model)
    embedder = directory.documents().embedder
    texts = request.texts
    vectors = jobs.embed(embedder.embed, texts, cancel)
    tokens = sum(embedder.count_tokens(text) for text in texts)
    return embeddings_json(model, vectors, request.encoding_format, tokens)
