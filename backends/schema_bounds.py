"""What a JSON schema may ask of a grammar, checked before any converter sees it. Pure.

llama-cpp-python's schema converter writes every repetition out in full: ``{"type": "string", "minLength": N}``
becomes N copies of the rule for one character, so a schema of a few bytes can ask for a grammar of gigabytes
before any size check on the result could run. :func:`overreach` walks a schema without recursion and names the
first place that asks for too much: a count (``minLength``, ``maxItems``, ...) above :data:`MAX_REPEAT` (llama.cpp's
own bound on a repetition in a grammar), a pattern quantifier above it, more repetitions in all than
:data:`MAX_REPEATS_IN_ALL` would write, an object with more than :data:`MAX_PROPERTIES` properties (the converter's
work grows with their square), or nesting deeper than :data:`MAX_DEPTH`. What passes converts to a grammar of at
most a few megabytes, which the callers' own limit on the grammar's length then judges.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_REPEAT = 2_000
MAX_REPEATS_IN_ALL = 20_000
MAX_PROPERTIES = 256
MAX_DEPTH = 64

# Pairs whose larger value is what the converter writes out: (at least, at most).
_COUNTS = (("minLength", "maxLength"), ("minItems", "maxItems"), ("minProperties", "maxProperties"))


@dataclass(frozen=True)
class Overreach:
    """Where a schema asks for too much (a dotted path inside the schema, empty for its top) and what it asks."""

    path: str
    reason: str


def overreach(schema: object) -> Overreach | None:
    """The first place in ``schema`` that asks a grammar for more than it may write, or None when none does."""
    spent = 0
    pending: list[tuple[object, str, int]] = [(schema, "", 0)]
    while pending:
        node, path, depth = pending.pop()
        if depth > MAX_DEPTH:
            return Overreach(path, f"it nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, list):
            pending.extend((item, f"{path}[{index}]", depth + 1) for index, item in reversed(list(enumerate(node))))
            continue
        if not isinstance(node, dict):
            continue
        for where, reason, cost in _asks(node, path):
            if reason:
                return Overreach(where, reason)
            spent += cost
            if spent > MAX_REPEATS_IN_ALL:
                return Overreach(
                    where, f"together with the counts before it, it asks for more than {MAX_REPEATS_IN_ALL:,} repeats"
                )
        pending.extend((value, _join(path, str(key)), depth + 1) for key, value in reversed(list(node.items())))
    return None


def _asks(node: dict[Any, Any], path: str) -> Iterator[tuple[str, str, int]]:
    """What one schema object asks for: (where, why it is refused or "", repeats it costs)."""
    for low, high in _COUNTS:
        largest = 0
        for keyword in (low, high):
            value = node.get(keyword)
            if isinstance(value, int | float) and not isinstance(value, bool):
                if value > MAX_REPEAT:
                    yield _join(path, keyword), f"{keyword} {value:,} is above {MAX_REPEAT:,}", 0
                    return
                largest = max(largest, int(value))
        if largest:
            yield _join(path, high if high in node else low), "", largest
    properties = node.get("properties")
    if isinstance(properties, dict) and len(properties) > MAX_PROPERTIES:
        yield _join(path, "properties"), f"it has {len(properties):,} properties; at most {MAX_PROPERTIES} are read", 0
        return
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        where = _join(path, "pattern")
        for count, width in quantifiers(pattern):
            if count > MAX_REPEAT:
                yield where, f"its quantifier {{{count:,}}} is above {MAX_REPEAT:,}", 0
                return
            yield where, "", count * width


def quantifiers(pattern: str) -> Iterator[tuple[int, int]]:
    """Each ``{n}``, ``{n,}`` or ``{n,m}`` in ``pattern`` as (the larger count, the length of what it repeats).
    A quantifier that is not one (``{a}``) is left to the converter, which refuses it."""
    at = 0
    starts: list[int] = []  # where each open group began
    atom = 0  # where the last thing a quantifier could repeat began
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            atom, at = at, at + 2
            continue
        if char == "[":
            end = _class_end(pattern, at)
            atom, at = at, end
            continue
        if char == "(":
            starts.append(at)
            at += 1
            continue
        if char == ")":
            atom = starts.pop() if starts else at
            at += 1
            continue
        if char == "{":
            end = pattern.find("}", at)
            if end < 0:
                return
            numbers = [part.strip() for part in pattern[at + 1 : end].split(",")]
            counts = [int(part) for part in numbers if part.isdigit()]
            if counts:
                yield max(counts), max(1, at - atom)
            at = end + 1
            continue
        atom, at = at, at + 1


def _class_end(pattern: str, start: int) -> int:
    """Where the character class opened at ``start`` ends (past its ``]``)."""
    at = start + 1
    if at < len(pattern) and pattern[at] == "^":
        at += 1
    if at < len(pattern) and pattern[at] == "]":
        at += 1
    while at < len(pattern) and pattern[at] != "]":
        at += 2 if pattern[at] == "\\" else 1
    return at + 1


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
