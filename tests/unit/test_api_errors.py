"""Typed errors become OpenAI-shaped HTTP errors with the right status, and Retry-After where waiting helps."""

from __future__ import annotations

import pytest

from app.api.errors import (
    BodyTooLarge,
    KeyRefused,
    Refused,
    RequestInvalid,
    UnknownEndpoint,
    UnknownModel,
    reply_for,
)
from models.shared.errors import (
    Busy,
    ContextTooLong,
    DoesNotFit,
    EmptyMessage,
    EngineStopped,
    GenerationError,
    HearthError,
    ModelLoadError,
    ModelNotReady,
    StorageError,
)
from rag.manifest import CollectionError


@pytest.mark.parametrize(
    ("error", "status", "code", "retry_after"),
    [
        (RequestInvalid("bad", "fix", param="temperature"), 400, "invalid_value", None),
        (RequestInvalid("bad", "fix", code="invalid_json"), 400, "invalid_json", None),
        (EmptyMessage("empty", "type"), 400, "empty_prompt", None),
        (KeyRefused("no key", "send it", code="missing_api_key"), 401, "missing_api_key", None),
        (Refused("foreign", "no", code="origin_not_allowed"), 403, "origin_not_allowed", None),
        (UnknownModel("no such", "pick"), 404, "model_not_found", None),
        (UnknownEndpoint("no such", "use"), 404, "unknown_endpoint", None),
        (CollectionError("no such", "create"), 404, "collection_not_found", None),
        (ContextTooLong("long", "shorten"), 413, "context_length_exceeded", None),
        (BodyTooLarge("big", "less"), 413, "request_too_large", None),
        (Busy("busy", "later", retry_after_s=7), 429, "busy", 7),
        (ModelNotReady("loading", "wait"), 503, "model_not_ready", 5),
        (EngineStopped("died", "restarting"), 503, "engine_restarting", 5),
        (ModelLoadError("refused", "other model"), 503, "model_unavailable", None),
        (DoesNotFit("too big", "smaller"), 503, "model_unavailable", None),
        (GenerationError("failed", "again"), 500, "generation_failed", None),
        (StorageError("disk", "space"), 500, "server_error", None),
    ],
)
def test_each_error_gets_its_status_and_code(
    error: HearthError, status: int, code: str, retry_after: int | None
) -> None:
    reply = reply_for(error)
    assert (reply.status, reply.code, reply.retry_after_s) == (status, code, retry_after)
    body = reply.body()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    # The message says what happened and what to do.
    assert body["message"] == f"{error.message} {error.remedy}"
    if retry_after is None:
        assert "Retry-After" not in reply.headers()
    else:
        assert reply.headers()["Retry-After"] == str(retry_after)


def test_a_bad_field_is_named_in_param() -> None:
    assert reply_for(RequestInvalid("bad", "fix", param="messages[0].role")).body()["error"]["param"] == (
        "messages[0].role"
    )


def test_a_refused_key_asks_for_bearer_auth() -> None:
    headers = reply_for(KeyRefused("wrong", "use the new one", code="invalid_api_key")).headers()
    assert headers["WWW-Authenticate"].startswith("Bearer")


def test_an_unexpected_error_says_nothing_of_its_insides() -> None:
    reply = reply_for(ValueError("secret path /home/me/x"))
    assert reply.status == 500
    assert "secret" not in reply.message
    assert reply.type == "server_error"
