"""The JSON Hearth answers with, in OpenAI's shapes, plus one extension field, ``hearth``: the collection and its
numbered sources when the answer came from documents, the turns left out to fit, and the engine's timings.
Pure functions of what the engine reported."""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from app.services.answering.attachment_plan import AttachmentUse
from backends.base import FinishReason, ToolCall, Usage
from rag.prompt import Source

Kind = Literal["chat", "completion"]
_OBJECT = {
    ("chat", False): "chat.completion",
    ("chat", True): "chat.completion.chunk",
    ("completion", False): "text_completion",
    ("completion", True): "text_completion",
}


@dataclass(frozen=True)
class AnswerMeta:
    """What every chunk of one answer repeats."""

    kind: Kind
    model: str
    id: str = ""
    created: int = 0

    @staticmethod
    def new(kind: Kind, model: str) -> AnswerMeta:
        prefix = "chatcmpl" if kind == "chat" else "cmpl"
        return AnswerMeta(kind, model, f"{prefix}-{secrets.token_hex(12)}", int(time.time()))

    def envelope(self, chunk: bool) -> dict[str, Any]:
        kind = _OBJECT[(self.kind, chunk)]
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}


@dataclass(frozen=True)
class Extension:
    """The ``hearth`` field: known once the answer has started (sources) and when it ends (timings)."""

    collection: str | None = None
    sources: tuple[Source, ...] = ()
    dropped_messages: int = 0
    usage: Usage | None = None
    finish: FinishReason | None = None
    attachments: tuple[AttachmentUse, ...] = ()  # how each file sent with the request was used
    answer: str | None = None  # an answer from documents as kept (named, citations checked), sent when streamed
    corrections: tuple[str, ...] = ()  # what that check changed, in words

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.collection is not None:
            body["collection"] = self.collection
        if self.collection is not None or self.attachments:
            body["sources"] = [source_json(s) for s in self.sources]
        if self.attachments:
            body["attachments"] = [
                {"file": use.name, "use": use.mode, "passages": use.passages, "words": use.words}
                for use in self.attachments
            ]
        if self.answer is not None:
            body["answer"] = self.answer
        if self.corrections:
            body["corrections"] = list(self.corrections)
        if self.dropped_messages:
            body["dropped_messages"] = self.dropped_messages
        if self.usage is not None:
            body["timings"] = {
                "time_to_first_token_ms": round(self.usage.time_to_first_token_ms, 1),
                "total_ms": round(self.usage.total_ms, 1),
                "decode_tokens_per_s": round(self.usage.decode_tokens_per_s, 1),
            }
        if self.finish == "cancelled":
            # OpenAI clients know only stop/length; the answer was cut short by a model switch or shutdown.
            body["cancelled"] = True
        return body


def finish_reason(reason: FinishReason | None, called: bool = False) -> str:
    if reason == "length":
        return "length"
    return "tool_calls" if called else "stop"


def call_json(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    """A tool call as OpenAI sends it (with ``index`` in a stream's delta)."""
    body: dict[str, Any] = {"index": index} if index is not None else {}
    return body | {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def source_json(source: Source) -> dict[str, Any]:
    return {
        "number": source.number,
        "label": source.label,
        "file": Path(source.path).name,
        "page": source.page,
        "section": source.section,
        "text": source.text,
    }


def usage_json(usage: Usage | None) -> dict[str, Any]:
    prompt = usage.prompt_tokens if usage else 0
    completion = usage.completion_tokens if usage else 0
    # Reported by engines that reuse a cached prompt prefix; older ones do not have the field.
    cached = int(getattr(usage, "cached_tokens", 0) or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def answer_json(meta: AnswerMeta, text: str, extension: Extension, calls: Sequence[ToolCall] = ()) -> dict[str, Any]:
    """A whole, non-streamed answer; with ``calls``, the tool calls it made (its text, if any, as content)."""
    reason = finish_reason(extension.finish, bool(calls))
    choice: dict[str, Any] = {"index": 0, "finish_reason": reason, "logprobs": None}
    if meta.kind == "chat":
        choice["message"] = {"role": "assistant", "content": text or (None if calls else text)}
        if calls:
            choice["message"]["tool_calls"] = [call_json(c) for c in calls]
    else:
        choice["text"] = text
    return meta.envelope(chunk=False) | {
        "choices": [choice],
        "usage": usage_json(extension.usage),
        "hearth": extension.to_json(),
    }


def chunk_json(
    meta: AnswerMeta, text: str | None, finish: FinishReason | None = None, first: bool = False, called: bool = False
) -> dict[str, Any]:
    """One streamed piece: text, or (with ``finish``) the end of the answer (``called``: it made tool calls)."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish_reason(finish, called) if finish else None}
    if meta.kind == "chat":
        delta: dict[str, Any] = {"role": "assistant"} if first else {}
        if text is not None:
            delta["content"] = text
        choice["delta"] = delta
    else:
        choice["text"] = text or ""
        choice["logprobs"] = None
    return meta.envelope(chunk=True) | {"choices": [choice]}


def call_chunk_json(meta: AnswerMeta, call: ToolCall, index: int) -> dict[str, Any]:
    """A streamed tool call's first delta: its id, name and the arguments written so far (all of them for a call
    read whole)."""
    delta = {"tool_calls": [call_json(call, index)]}
    return meta.envelope(chunk=True) | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def call_piece_json(meta: AnswerMeta, index: int, arguments: str) -> dict[str, Any]:
    """The next piece of a streamed call's arguments, as OpenAI streams them (clients join the pieces)."""
    delta = {"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}
    return meta.envelope(chunk=True) | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def usage_chunk_json(meta: AnswerMeta, extension: Extension) -> dict[str, Any]:
    """The chunk ``stream_options.include_usage`` asks for: no choices, the usage of the whole answer."""
    return meta.envelope(chunk=True) | {"choices": [], "usage": usage_json(extension.usage)}


def embeddings_json(
    model: str, vectors: np.ndarray, encoding: Literal["float", "base64"], prompt_tokens: int
) -> dict[str, Any]:
    rows = np.asarray(vectors, dtype="<f4")
    data = [
        {
            "object": "embedding",
            "index": index,
            # base64 of little-endian float32 is what the openai client asks for by default and decodes itself.
            "embedding": base64.b64encode(row.tobytes()).decode("ascii") if encoding == "base64" else row.tolist(),
        }
        for index, row in enumerate(rows)
    ]
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


@dataclass(frozen=True)
class ModelEntry:
    id: str
    kind: Literal["chat", "adapter", "collection", "embedding"]
    created: int
    details: dict[str, Any] = field(default_factory=dict)


def models_json(entries: Sequence[ModelEntry]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": entry.id,
                "object": "model",
                "created": entry.created,
                "owned_by": "hearth",
                "hearth": {"kind": entry.kind, **entry.details},
            }
            for entry in entries
        ],
    }
