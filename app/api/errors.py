"""Typed errors to HTTP: the status, OpenAI's error shape ``{"error": {"message", "type", "param", "code"}}``,
and ``Retry-After`` where waiting helps. Pure: a table over exception classes, matched along the class's MRO so a
subclass inherits its parent's reply until it is given its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from models.shared.errors import (
    BackendUnavailable,
    Busy,
    ContextTooLong,
    DoesNotFit,
    EmptyMessage,
    EngineStopped,
    GenerationError,
    HearthError,
    InvalidChoice,
    ModelFileError,
    ModelLoadError,
    ModelNotReady,
)
from models.store import ModelNotKnown
from rag.manifest import CollectionError

# A restart or a load takes seconds; asking again sooner only adds load.
RESTART_RETRY_AFTER_S = 5
PAGE_SECRET_REQUIRED = "page_secret_required"


class RequestInvalid(HearthError):
    """The request cannot be read: not JSON, a field of the wrong type or value, a missing field."""

    def __init__(self, message: str, remedy: str, param: str | None = None, code: str = "invalid_value") -> None:
        super().__init__(message, remedy)
        self.param = param
        self.code = code


class UnknownModel(HearthError):
    """A model id that names neither the loaded model, a collection, nor the embedder."""

    def __init__(self, message: str, remedy: str, param: str | None = None) -> None:
        super().__init__(message, remedy)
        self.param = param


class UnknownEndpoint(HearthError):
    """A path under /v1 that Hearth does not serve."""


class BodyTooLarge(HearthError):
    """The request body is over the size cap; it was not read to the end."""


class KeyRefused(HearthError):
    """The API key is missing or wrong."""

    def __init__(self, message: str, remedy: str, code: str) -> None:
        super().__init__(message, remedy)
        self.code = code


class PageLocked(HearthError):
    """A page route was asked for without this start's page secret (app.api.page_gate)."""


class Refused(HearthError):
    """The request names a host, or comes from an origin, that this server does not answer."""

    def __init__(self, message: str, remedy: str, code: str) -> None:
        super().__init__(message, remedy)
        self.code = code


@dataclass(frozen=True)
class _Rule:
    status: int
    type: str
    code: str | None
    retry_after_s: int | None = None


_RULES: dict[type[BaseException], _Rule] = {
    RequestInvalid: _Rule(400, "invalid_request_error", "invalid_value"),
    EmptyMessage: _Rule(400, "invalid_request_error", "empty_prompt"),
    KeyRefused: _Rule(401, "authentication_error", "invalid_api_key"),
    PageLocked: _Rule(401, "authentication_error", PAGE_SECRET_REQUIRED),
    Refused: _Rule(403, "permission_error", "forbidden"),
    InvalidChoice: _Rule(400, "invalid_request_error", "invalid_value"),
    UnknownModel: _Rule(404, "invalid_request_error", "model_not_found"),
    ModelNotKnown: _Rule(404, "invalid_request_error", "model_not_found"),
    UnknownEndpoint: _Rule(404, "invalid_request_error", "unknown_endpoint"),
    CollectionError: _Rule(404, "invalid_request_error", "collection_not_found"),
    ContextTooLong: _Rule(413, "invalid_request_error", "context_length_exceeded"),
    BodyTooLarge: _Rule(413, "invalid_request_error", "request_too_large"),
    Busy: _Rule(429, "rate_limit_error", "busy", 2),
    ModelNotReady: _Rule(503, "service_unavailable", "model_not_ready", RESTART_RETRY_AFTER_S),
    EngineStopped: _Rule(503, "service_unavailable", "engine_restarting", RESTART_RETRY_AFTER_S),
    # A model that cannot load stays unavailable until someone changes it: waiting would not help.
    ModelFileError: _Rule(503, "service_unavailable", "model_unavailable"),
    ModelLoadError: _Rule(503, "service_unavailable", "model_unavailable"),
    DoesNotFit: _Rule(503, "service_unavailable", "model_unavailable"),
    BackendUnavailable: _Rule(503, "service_unavailable", "model_unavailable"),
    GenerationError: _Rule(500, "server_error", "generation_failed"),
    HearthError: _Rule(500, "server_error", "server_error"),
}

INTERNAL_MESSAGE = "Hearth could not answer because of an internal error."
INTERNAL_REMEDY = "Try again; if it keeps happening, run Hearth with --verbose and look at its log."


@dataclass(frozen=True)
class ErrorReply:
    status: int
    message: str
    type: str
    code: str | None
    param: str | None = None
    retry_after_s: int | None = None

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        headers = {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else {}
        if self.status == 401 and self.code != PAGE_SECRET_REQUIRED:  # the page's gate is not a Bearer scheme
            headers["WWW-Authenticate"] = 'Bearer realm="hearth"'
        return headers


def reply_for(exc: BaseException) -> ErrorReply:
    """The HTTP reply for ``exc``. Errors that are not Hearth's own say nothing of their insides (they are logged
    by the caller instead)."""
    rule = next((_RULES[cls] for cls in type(exc).__mro__ if cls in _RULES), None)
    if rule is None or not isinstance(exc, HearthError):
        return ErrorReply(500, f"{INTERNAL_MESSAGE} {INTERNAL_REMEDY}", "server_error", "internal_error")
    code = getattr(exc, "code", None) or rule.code
    retry = exc.retry_after_s if isinstance(exc, Busy) else rule.retry_after_s
    return ErrorReply(rule.status, f"{exc.message} {exc.remedy}", rule.type, code, getattr(exc, "param", None), retry)
