"""Training data: JSON Lines in three shapes, read and checked before anything is trained.

Each line is one example: ``{"messages": [{"role": ..., "content": ...}, ...]}`` (a chat; the loss is on the
assistant's turns), ``{"prompt": ..., "completion": ...}`` (one exchange, read as a user turn and an answer),
or ``{"text": ...}`` (plain language modelling on the whole text). Blank lines are skipped. A file with any
bad line is refused as a whole, naming the first bad line and why, so a run never trains on half of what the
person meant. Everything here is pure apart from :func:`read_examples`, which reads the file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from models.shared.chat import ChatMessage
from models.shared.errors import TrainingDataError

# One example larger than this is almost certainly a whole document on one line (or not training data at all);
# it would be cut to the run's max length anyway, so it is refused with a way to split it.
MAX_EXAMPLE_BYTES = 1 << 20
# The held-out check scores each held-out example before and after the run: past a few hundred, more examples make
# the check slower, not truer.
MAX_HELD_OUT = 200
_SKIP_CHUNK = 1 << 20
ROLES = ("system", "user", "assistant")
FORMAT_HINT = (
    'Each line must be one JSON object: {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", '
    '"content": "..."}]}, or {"prompt": "...", "completion": "..."}, or {"text": "..."}.'
)


@dataclass(frozen=True)
class ChatExample:
    """A conversation; the model learns to write its assistant turns."""

    messages: tuple[ChatMessage, ...]


@dataclass(frozen=True)
class TextExample:
    """Plain text; the model learns to continue all of it."""

    text: str


Example = ChatExample | TextExample


@dataclass(frozen=True)
class BadLine:
    number: int
    reason: str


@dataclass(frozen=True)
class Split:
    """Examples to train on, and the held-out ones the run measures itself against."""

    train: tuple[Example, ...]
    held_out: tuple[Example, ...]

    @property
    def checked_on_training_data(self) -> bool:
        """Too few examples to hold any out: the before/after check then uses the training examples."""
        return not self.held_out


def read_examples(path: Path) -> list[Example]:
    """The examples in ``path``, or :class:`TrainingDataError` naming the first problem."""
    try:
        with path.open("rb") as handle:
            examples, bad = parse_lines(bounded_lines(handle))
    except FileNotFoundError:
        raise TrainingDataError(f"Training data not found: {path}.", "Check the path.") from None
    except IsADirectoryError:
        raise TrainingDataError(f"{path} is a folder.", "Name a .jsonl file.") from None
    except OSError as exc:
        raise TrainingDataError(f"Cannot read {path}: {exc.strerror or exc}.", "Check its permissions.") from exc
    if bad:
        more = f" ({len(bad) - 1} more bad line{'s' if len(bad) > 2 else ''} after it)" if len(bad) > 1 else ""
        raise TrainingDataError(f"{path.name}, line {bad[0].number}: {bad[0].reason}{more}.", FORMAT_HINT)
    if not examples:
        raise TrainingDataError(f"{path.name} has no examples.", FORMAT_HINT)
    return examples


def bounded_lines(handle: BinaryIO) -> Iterator[tuple[int, bytes | int]]:
    """Each line of ``handle`` with its number, read at most :data:`MAX_EXAMPLE_BYTES` at a time: a longer line
    comes as its length in bytes, the rest of it read past in chunks and let go, so memory never follows the
    longest line."""
    number = 0
    while raw := handle.readline(MAX_EXAMPLE_BYTES + 1):
        number += 1
        if len(raw) <= MAX_EXAMPLE_BYTES or raw.endswith(b"\n"):
            yield number, raw
            continue
        length = len(raw)
        while (rest := handle.readline(_SKIP_CHUNK)) and not rest.endswith(b"\n"):
            length += len(rest)
        yield number, length + len(rest)


def parse_lines(lines: Iterable[tuple[int, bytes | int]]) -> tuple[list[Example], list[BadLine]]:
    """The examples in ``lines`` (numbered; a line too long to read comes as its length) and the bad lines."""
    examples: list[Example] = []
    bad: list[BadLine] = []
    for number, raw in lines:
        size = raw if isinstance(raw, int) else len(raw)
        if isinstance(raw, int) or size > MAX_EXAMPLE_BYTES:
            bad.append(BadLine(number, f"is {size / 1e6:.1f} MB; one example may be at most 1 MB ({_SPLIT_IT})"))
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad.append(BadLine(number, f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"))
            continue
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.append(BadLine(number, f"is not JSON ({exc.msg} at column {exc.colno})"))
            continue
        except RecursionError:
            bad.append(BadLine(number, "nests lists or objects thousands deep, which no training example does"))
            continue
        parsed = parse_example(item)
        if isinstance(parsed, str):
            bad.append(BadLine(number, parsed))
        else:
            examples.append(parsed)
    return examples, bad


_SPLIT_IT = 'split a long document into several {"text": ...} lines'


def parse_example(item: object) -> Example | str:
    """One example, or why the object is not one."""
    if not isinstance(item, dict):
        return f"is a JSON {_json_kind(item)}, not an object"
    keys = set(item)
    if "messages" in keys:
        return _chat(item["messages"])
    if {"prompt", "completion"} <= keys:
        prompt, completion = item["prompt"], item["completion"]
        if not isinstance(prompt, str) or not isinstance(completion, str):
            return '"prompt" and "completion" must both be text'
        if not completion.strip():
            return '"completion" is empty: there is nothing to learn'
        return ChatExample((ChatMessage("user", prompt), ChatMessage("assistant", completion)))
    if "text" in keys:
        text = item["text"]
        if not isinstance(text, str):
            return '"text" must be text'
        if not text.strip():
            return '"text" is empty'
        return TextExample(text)
    shown = ", ".join(f'"{key}"' for key in sorted(keys)[:6]) or "no keys"
    return f'has {shown}; expected "messages", or "prompt" and "completion", or "text"'


def _chat(messages: object) -> ChatExample | str:
    if not isinstance(messages, list) or not messages:
        return '"messages" must be a non-empty list'
    parsed: list[ChatMessage] = []
    for index, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            return f"message {index} is not an object"
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            return f'message {index} has role {json.dumps(role)}; roles are "system", "user" and "assistant"'
        if not isinstance(content, str):
            return f'message {index} has no text "content"'
        parsed.append(ChatMessage(role, content))
    if not any(m.role == "assistant" and m.content.strip() for m in parsed):
        return "has no assistant message with text: there is nothing to learn"
    return ChatExample(tuple(parsed))


def _json_kind(item: object) -> str:
    if isinstance(item, list):
        return "list"
    if isinstance(item, str):
        return "string"
    if isinstance(item, bool):
        return "true/false"
    if item is None:
        return "null"
    return "number"


def held_out_count(total: int) -> int:
    """One example in ten is held out, when there are at least ten (with fewer, none: each one is needed), and at
    most :data:`MAX_HELD_OUT`."""
    return min(total // 10, MAX_HELD_OUT) if total >= 10 else 0


def split_examples(examples: Sequence[Example], seed: int = 0) -> Split:
    """A held-out split drawn with ``seed``, the same every time for the same data (so a resumed run and the
    check after it measure the same examples)."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    count = held_out_count(len(examples))
    held = sorted(order[:count])
    kept = sorted(order[count:])
    return Split(tuple(examples[i] for i in kept), tuple(examples[i] for i in held))
