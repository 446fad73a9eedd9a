"""Calls written whole, in the forms models were taught by their makers, read back as calls.

Hearth asks every model for its tagged form (``backends.tool_calls``), but a model trained on another form often
opens its answer with that one instead, and an answer that is only calls is read here, once it has ended:

- a bare JSON object, ``{"name": ..., "arguments": {...}}`` or with ``"parameters"`` (Llama 3.x), its braces
  doubled as Qwen2.5's template shows the form, or inside a Markdown fence;
- Llama 3.x's python tag before it (``<|python_tag|>``, where its text is shown), several calls separated by ``;``;
- Phi-4-mini's ``functools[...]``: a JSON list of calls (its closing bracket may be missing where the grammar ended
  the answer after the first call);

Pure.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

from backends.base import ToolCall

# Words a model may write before its calls: Llama 3.x's python tag and Phi-4-mini's list name.
MARKERS = ("<|python_tag|>", "functools")
_FENCE_OPEN = re.compile(r"^```(?:json)?\s*")
_FENCE_CLOSE = re.compile(r"\s*```$")
# An answer that opens like this is held whole and read when it ends.
OPENING = re.compile(r"(?:<\|python_tag\|>|functools)?\s*(?:```(?:json)?\s*)?\[?\s*\{\{?\s*\"name\"")
_SEPARATORS = " \t\r\n,;"


def new_call_id() -> str:
    return f"call_{secrets.token_hex(12)}"


def read_call(body: str) -> ToolCall | None:
    """The one call ``body`` is, or None when it is not ``{"name": ..., "arguments": {...}}`` (in doubled braces
    too, as Qwen2.5's template shows the form)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        value = _in_doubled_braces(body)
    return call_from(value)


def call_from(value: Any) -> ToolCall | None:
    """The call a decoded JSON value is: a name and its arguments (or parameters)."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(new_call_id(), value["name"], text)


def read_whole(text: str) -> tuple[ToolCall, ...] | None:
    """The calls an answer that opened with :data:`OPENING` made, or None when it is not only calls (it is then
    shown as the text it is)."""
    body = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", _without_marker(text.strip())))
    single = read_call(body)
    if single is not None:
        return (single,)
    listed = body.startswith("[")
    at = 1 if listed else 0
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    while True:
        while at < len(body) and body[at] in _SEPARATORS:
            at += 1
        if at == len(body) or (listed and body[at:].strip() == "]"):
            return tuple(calls) or None
        try:
            value, at = decoder.raw_decode(body, at)
        except (ValueError, RecursionError):
            return None
        call = call_from(value)
        if call is None:
            return None
        calls.append(call)


def may_open(text: str) -> bool:
    """Whether ``text`` (without leading spaces) may still become an :data:`OPENING`."""
    rest = text
    for marker in MARKERS:
        if rest.startswith(marker):
            rest = rest[len(marker) :].lstrip()
            break
        if marker.startswith(rest):
            return True
    if rest.startswith("```"):
        rest = rest[3:]
        if len(rest) < 4 and "json".startswith(rest):
            return True
        rest = rest.removeprefix("json").lstrip()
    elif "```".startswith(rest):
        return True
    if rest.startswith("["):
        rest = rest[1:].lstrip()
    return not rest or _may_object(rest)


def _may_object(text: str) -> bool:
    if not text.startswith("{"):
        return False
    rest = text[1:].lstrip()
    if rest.startswith("{"):  # the doubled brace of Qwen2.5's example
        rest = rest[1:].lstrip()
    return '"name"'.startswith(rest) if len(rest) < 6 else rest.startswith('"name"')


def _without_marker(text: str) -> str:
    for marker in MARKERS:
        if text.startswith(marker):
            return text[len(marker) :].lstrip()
    return text


def _in_doubled_braces(body: str) -> Any:
    """The object inside ``{{...}}`` (the outer closing brace may be missing, or doubled), or None."""
    text = body.strip()
    if not text.startswith("{{"):
        return None
    try:
        value, end = json.JSONDecoder().raw_decode(text, 1)
    except (ValueError, RecursionError):
        return None
    return value if set(text[end:].strip()) <= {"}"} else None
