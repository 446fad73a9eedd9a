"""Hearth's own endpoints beside the OpenAI ones, under ``/v1/hearth`` (so the same key guards them): what is
running, and switching the model, backend, device or context — what the Models and Hardware tabs do, for the
CLI (`hearth use`) and for scripts."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse, Response

from app.api.delivery import error_response
from app.api.schemas import parse_request
from app.services.container import Services
from app.services.serving.model_handles import RuntimeStatus
from backends import registry


class SwitchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, description="A model id or file name from `hearth models list`.")
    backend: str | None = Field(default=None, description=f"One of {', '.join(registry.choice_names())}.")
    device: str | None = Field(default=None, description="auto, cpu, cuda, cuda:N, gpu or npu.")
    context_length: int | None = Field(default=None, description="Context window in tokens.")
    cancel_running: bool = Field(
        default=False, description="Stop the answers being written now instead of waiting for them."
    )


def status_json(status: RuntimeStatus) -> dict[str, Any]:
    plan = status.plan
    return {
        "state": status.state,
        "model": status.model_name,
        "message": status.message,
        "backend": plan.label if plan else None,
        "devices": [str(d) for d in plan.devices] if plan else [],
        "context_length": plan.context_length if plan else None,
        "slots": status.slots,
        "answers": status.answers,
        "engine_pid": status.engine_pid,
        "notes": list(status.notes),
        "loading_beside": status.pending or None,
    }


def build_control_router(services: Services) -> APIRouter:
    router = APIRouter(prefix="/v1/hearth")

    @router.get("/status")
    async def status() -> Response:
        return JSONResponse(status_json(services.runtime.status))

    @router.post("/switch")
    async def switch(request: Request) -> Response:
        """Waits for the answers in flight (or cancels them), reloads, and answers with the new status. A choice
        that cannot work is refused and the running model keeps running."""
        try:
            wanted = parse_request(SwitchRequest, await request.body())
            await anyio.to_thread.run_sync(_switch, services, wanted)
        except Exception as exc:
            return error_response(exc)
        return JSONResponse(status_json(services.runtime.status))

    @router.post("/cancel-load")
    async def cancel_load() -> Response:
        """Stop a model load in progress (one stuck loading, or slow to answer its first question); the model
        that served before keeps serving. ``cancelled`` says whether there was a load to stop."""
        cancelled = await anyio.to_thread.run_sync(services.control.cancel_load)
        return JSONResponse({"cancelled": cancelled, **status_json(services.runtime.status)})

    return router


def _switch(services: Services, wanted: SwitchRequest) -> None:
    steps = services.control.change(
        model=wanted.model,
        backend=wanted.backend,
        device=wanted.device,
        context_length=wanted.context_length,
        cancel_running=wanted.cancel_running,
    )
    for _ in steps:
        pass
