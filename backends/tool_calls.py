"""Tool calls in the model's text: how they are asked for, held to their schemas, and read back.

Hearth uses one written form of a call, the one Qwen2.5's and Hermes' templates teach their models::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Oslo"}}
    </tool_call>

A template that knows this form renders the tools itself (``native``); for any other (SmolLM2's, Llama's, ChatML)
Hearth writes the same instructions into the system message and the earlier calls and results into the turns as
text (``generic_messages``), so every model is asked the same way. Either way the calls are read back by
:func:`split_calls` (a whole answer) or :class:`CallScanner` (a stream); asked for ``pieces``, the scanner also
gives a tagged call's id and name as soon as they are written (:class:`CallBegun`) and its arguments as the model
writes them (:class:`CallArguments`), so a streamed reply can carry them the way OpenAI streams its calls.

:func:`calls_grammar` holds each call to its function's parameter schema: with ``tool_choice`` ``auto`` the
grammar is lazy, the model writes text freely and the grammar takes over from the first ``<tool_call>`` it writes
(llama.cpp's lazy grammar, as llama-server does it); ``required`` or one named function make the answer start with
a call. After the calls the answer ends, so a returned call is always valid JSON for its schema.

Pure, apart from the schema converter llama-cpp-python ships (pure Python).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, overload

from backends.base import ChatEvent, ChatMessage, Finished, Grammar, Reading, TextDelta, ToolCall, ToolSpec, Usage
from backends.call_forms import OPENING, may_open, new_call_id, read_call, read_whole
from backends.grammar import (
    MAX_GRAMMAR_CHARS,
    MAX_SCHEMA_CHARS,
    SchemaRefused,
    converter_said,
    inside,
    strict_strings,
)
from backends.schema_bounds import overreach
from backends.schema_refs import own_definitions, root_reference_as_union
from models.shared.errors import InvalidChoice

OPEN, CLOSE = "<tool_call>", "</tool_call>"
# A line on when to call, after the system prompt (hearth eval tools --form guided measures it).
CALL_GUIDANCE = (
    "Call a function only when the request needs what that function does. If the request is a question you can "
    "answer yourself, or none of the functions fits it, answer directly without calling anything."
)
Family = Literal["native", "generic"]

# llama.cpp matches each pattern against all the text written so far (a full match); the grammar then reads the
# text from the first group on, so that text must be one the grammar accepts: the marker anywhere, or (as small
# models often write a call) a bare or fenced JSON call opening the answer, each ending where a call may go on. An
# answer whose text fits none of them is never held (it is read back as text).
_WS = r"[ \t\n]{0,24}"
_AFTER_NAME = _WS + r":?" + _WS + r"\"?"
_MARKER = r"(?:<\|python_tag\|>|functools" + _WS + r"\[)"
_TRIGGERS = (
    r"^[\s\S]*?(" + OPEN + r")" + _WS + r"(\{" + _WS + r"\"?)?$",
    r"^" + _WS + r"(```(?:json)?" + _WS + r"\{" + _WS + r"\"name\")" + _AFTER_NAME + "$",
    r"^" + _WS + r"(\{" + _WS + r"\"name\")" + _AFTER_NAME + "$",
    r"^" + _WS + r"\{" + _WS + r"(\{" + _WS + r"\"name\")" + _AFTER_NAME + "$",  # doubled, as Qwen2.5 shows it
    # Llama 3.x's python tag (where its text is shown) or Phi-4-mini's list name before the call (backends.call_forms)
    r"^" + _WS + _MARKER + _WS + r"(\{" + _WS + r"\"name\")" + _AFTER_NAME + "$",
)
# A tagged call's opening up to its arguments, as the grammar writes it: the name is known, the arguments follow.
_HEADER = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*')
_HEADER_LONGEST = 512  # a call's opening not read by then is not streamed in pieces (it is read whole at its end)


def template_family(template: str | None) -> Family:
    """``native`` when the chat template renders tools and the ``<tool_call>`` form itself (Qwen2.5, Hermes)."""
    return "native" if template and OPEN in template and "tools" in template else "generic"


def tool_json(tool: ToolSpec) -> dict[str, Any]:
    """The tool as OpenAI sends it and templates read it."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": json.loads(tool.parameters)},
    }


def call_json(call: ToolCall) -> dict[str, Any]:
    """A call as templates read it: the arguments as an object where they parse (Qwen's template prints them with
    ``tojson``). Arguments that are not JSON, or nest too deep to read back, stay the text they are."""
    try:
        arguments: Any = json.loads(call.arguments)
    except (ValueError, RecursionError):
        arguments = call.arguments
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def generic_messages(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> list[ChatMessage]:
    """``messages`` for a template that knows nothing of tools: the tools and how to call them in the system
    message, each earlier call as the assistant's text, each result as a user turn."""
    turns: list[ChatMessage] = []
    for message in messages:
        if message.role == "tool":
            result = f"<tool_response>\n{message.content}\n</tool_response>"
            if turns and turns[-1].role == "user" and turns[-1].content.startswith("<tool_response>"):
                turns[-1] = ChatMessage("user", f"{turns[-1].content}\n{result}")  # roles keep alternating
            else:
                turns.append(ChatMessage("user", result))
        elif message.tool_calls:
            written = "\n".join(_written_call(c) for c in message.tool_calls)
            turns.append(ChatMessage("assistant", f"{message.content}\n{written}".strip()))
        else:
            turns.append(ChatMessage(message.role, message.content))
    if not tools:
        return turns
    if turns and turns[0].role == "system":
        return [ChatMessage("system", f"{turns[0].content}\n\n{tools_instructions(tools)}"), *turns[1:]]
    return [ChatMessage("system", tools_instructions(tools)), *turns]


def tools_instructions(tools: Sequence[ToolSpec]) -> str:
    listed = "\n".join(json.dumps(tool_json(t), ensure_ascii=False) for t in tools)
    return (
        "You may call functions to help answer. They are:\n<tools>\n"
        f"{listed}\n</tools>\n\n"
        "To call one, write only this, with its arguments as a JSON object:\n"
        f'{OPEN}\n{{"name": "function name", "arguments": {{...}}}}\n{CLOSE}\n'
        "The result comes back in <tool_response></tool_response>. If no function is needed, answer directly."
    )


def _written_call(call: ToolCall) -> str:
    body = call_json(call)["function"]
    return f"{OPEN}\n{json.dumps(body, ensure_ascii=False)}\n{CLOSE}"


def calls_grammar(tools: Sequence[ToolSpec], forced: str | None, required: bool, parallel: bool) -> Grammar:
    """The grammar of one call (or, with ``parallel``, one or more) to ``tools`` (only ``forced``, when named), in
    Hearth's written form; lazy unless a call is ``required`` or ``forced``."""
    from llama_cpp import llama_grammar

    chosen = [t for t in tools if forced is None or t.name == forced]
    if not chosen:
        raise InvalidChoice(
            f"tool_choice names the function {forced!r}, which is not among the tools sent.",
            "Name one of the functions in tools, or send tool_choice 'auto'.",
        )
    converter: Any = getattr(llama_grammar, "SchemaConverter")(  # noqa: B009 (untyped: used as Any)
        prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False
    )
    alternatives = []
    for index, tool in enumerate(chosen):
        where = f"tools[{tools.index(tool)}].function.parameters"
        schema = parameters_schema(tool, where)
        try:
            schema = own_definitions(root_reference_as_union(schema), f"tool{index}-")
            schema = converter.resolve_refs(schema, f"tool{index}")
            arguments = converter.visit(schema, f"tool{index}-arguments")
        except RecursionError:
            raise _unusable(tool, "it nests too deeply", where) from None
        except Exception as exc:  # the converter raises whatever its parsing hits on a schema it does not follow
            raise _unusable(tool, converter_said(exc), where) from None
        name = json.dumps(json.dumps(tool.name))  # the JSON string, as a GBNF literal
        alternatives.append(f'{name} tc-ws "," tc-ws "\\"arguments\\"" tc-ws ":" tc-ws {arguments}')
    tagged = f"tc-call{' (tc-gap tc-call)*' if parallel else ''} tc-gap"
    rules = [
        f"root ::= {tagged}" if required or forced else "root ::= tc-tagged | tc-fenced | tc-object",
        f"tc-tagged ::= {tagged}",
        f'tc-call ::= "{OPEN}" tc-ws tc-object tc-ws "{CLOSE}"',
        'tc-fenced ::= "```" "json"? tc-ws tc-object tc-ws "```"',
        'tc-object ::= "{" tc-ws "\\"name\\"" tc-ws ":" tc-ws tc-function tc-ws "}"',
        "tc-function ::= " + " | ".join(f"( {a} )" for a in alternatives),
        "tc-ws ::= [ \\t\\n]{0,24}",
        'tc-gap ::= "\\n"?',
    ]
    gbnf = strict_strings("\n".join(rules) + "\n" + converter.format_grammar())
    if len(gbnf) > MAX_GRAMMAR_CHARS:
        raise InvalidChoice(
            f"The tools' parameter schemas make a grammar of {len(gbnf):,} characters; at most "
            f"{MAX_GRAMMAR_CHARS:,} are used.",
            "Send fewer tools, or simpler parameter schemas.",
        )
    return Grammar(gbnf, triggers=() if required or forced else _TRIGGERS)


def parameters_schema(tool: ToolSpec, where: str) -> Any:
    """The tool's parameter schema, read and bounded (:mod:`backends.schema_bounds`) before any converter sees it;
    :class:`SchemaRefused` naming the place (``where`` is the schema's own place in the request) if it asks for too
    much."""
    if len(tool.parameters) > MAX_SCHEMA_CHARS:
        raise _unusable(
            tool, f"they are {len(tool.parameters):,} characters long; at most {MAX_SCHEMA_CHARS:,} are read", where
        )
    try:
        schema = json.loads(tool.parameters)
    except (ValueError, RecursionError):
        raise _unusable(tool, "they are not JSON", where) from None
    found = overreach(schema)
    if found is not None:
        raise _unusable(tool, f"{found.reason} (at {found.path or 'their top'})", inside(where, found.path))
    return schema


def _unusable(tool: ToolSpec, reason: str, where: str) -> SchemaRefused:
    return SchemaRefused(
        f"The parameters of the function {tool.name!r} cannot be used: {reason}.",
        "Send a JSON Schema object for parameters, as OpenAI's function definitions have.",
        where,
    )


def split_calls(text: str) -> tuple[str, tuple[ToolCall, ...]]:
    """A whole answer as (its text, the calls it made); text that only looks like a call stays text."""
    scanner = CallScanner()
    pieces = [*scanner.feed(text), *scanner.finish()]
    said = "".join(p for p in pieces if isinstance(p, str))
    calls = tuple(p for p in pieces if isinstance(p, ToolCall))
    return (said.strip() if calls else said), calls


@dataclass(frozen=True)
class CallBegun:
    """A tagged call whose name is written and whose arguments come next; its :class:`ToolCall` has this id."""

    id: str
    name: str


@dataclass(frozen=True)
class CallArguments:
    """The next piece of the begun call's arguments, as the model wrote it (the pieces join to its JSON object)."""

    text: str


Piece = str | ToolCall | CallBegun | CallArguments


@overload
def calls_in(events: Iterable[ChatEvent], pieces: Literal[False] = False) -> Iterator[ChatEvent | ToolCall]: ...


@overload
def calls_in(
    events: Iterable[ChatEvent], pieces: Literal[True]
) -> Iterator[ChatEvent | ToolCall | CallBegun | CallArguments]: ...


def calls_in(
    events: Iterable[ChatEvent], pieces: bool = False
) -> Iterator[ChatEvent | ToolCall | CallBegun | CallArguments]:
    """An answer's events with its calls taken out of its text: text as :class:`TextDelta`, each call as a
    :class:`ToolCall` once it is complete (with ``pieces``, begun and its arguments as they are written before
    that), the other events as they come. A call left unfinished after complete ones, or cut off by the length
    limit, is dropped, not shown as text."""
    scanner = CallScanner(pieces=pieces)
    made = False
    for event in events:
        if isinstance(event, Usage | Reading):
            yield event
            continue
        ending = isinstance(event, Finished)
        for piece in scanner.feed(event.text) if isinstance(event, TextDelta) else scanner.finish():
            if isinstance(piece, ToolCall):
                made = True
                yield piece
            elif isinstance(piece, CallBegun | CallArguments):
                yield piece
            elif piece and not (ending and piece.startswith(OPEN) and (made or _cut(event))):
                yield TextDelta(piece)
        if ending:
            yield event


def _cut(event: ChatEvent) -> bool:
    return isinstance(event, Finished) and event.reason == "length"


@dataclass
class CallScanner:
    """Reads an answer as it streams: text goes out as it comes (except what may be the start of a marker), a call
    goes out once its closing marker is read. An answer that opens with a bare or fenced JSON call is held whole
    and read at the end. A call that does not parse is given back as the text it was.

    With ``pieces``, a tagged call written in the grammar's form (``{"name": ..., "arguments": {...}}``) is also
    given as it comes: :class:`CallBegun` once its name is read, then :class:`CallArguments` up to the object's
    closing brace. Other forms (bare, fenced, doubled braces) are read whole at their end, as without pieces."""

    pieces: bool = False
    _held: str = ""
    _inside: bool = False
    _after: int = 0  # inside a call: where to look for its closing marker (one inside a string is passed over)
    _opening: bool = True  # nothing but what may begin a bare or fenced call has been written
    _whole: bool = False  # the answer is one bare or fenced call
    _streaming: _StreamedCall | None = None  # the call being given in pieces

    def feed(self, text: str) -> list[Piece]:
        self._held += text
        if self._whole:
            return []
        if self._opening:
            begun = self._held.lstrip()
            if OPENING.match(begun):
                self._whole = True
                return []
            if not begun or may_open(begun):
                return []
            self._opening = False
        out: list[Piece] = []
        while True:
            if self._inside:
                end = self._held.find(CLOSE, self._after)
                if end >= 0 and _in_string(self._held[:end]):  # the marker is text inside one of the call's strings
                    self._after = end + len(CLOSE)
                    continue
                if self.pieces:
                    out += self._pieces(len(self._held) if end < 0 else end)
                if end < 0:
                    return out
                body, self._held = self._held[:end], self._held[end + len(CLOSE) :]
                self._inside, self._after = False, 0
                out.append(self._closed(body))
                continue
            start = self._held.find(OPEN)
            if start >= 0:
                if start:
                    out.append(self._held[:start])
                self._held, self._inside = self._held[start + len(OPEN) :], True
                continue
            keep = _partial_marker(self._held)
            if len(self._held) > keep:
                out.append(self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep :]
            return out

    def finish(self) -> list[Piece]:
        """What is left when the answer ends: a call held whole, or held text (a call never closed stays text)."""
        held, self._held = self._held, ""
        if self._whole:
            calls = read_whole(held)
            return [*calls] if calls is not None else [held]
        if self._inside:
            self._inside = False
            # the answer ended right after the call's JSON (the closing marker cut)
            return [self._closed(held, f"{OPEN}{held}")]
        return [held] if held else []

    def _closed(self, body: str, otherwise: str | None = None) -> str | ToolCall:
        """The call written as ``body`` (with the id it was begun under), or the text it was."""
        begun, self._streaming = self._streaming, None
        call = read_call(body)
        if call is None:
            return f"{OPEN}{body}{CLOSE}" if otherwise is None else otherwise
        return replace(call, id=begun.id) if begun is not None and begun.id else call

    def _pieces(self, upto: int) -> list[Piece]:
        """The begun call's name and its arguments written so far, up to ``upto`` in the held call."""
        streaming = self._streaming
        if streaming is None:
            header = _HEADER.match(self._held)
            if header is None or header.end() == len(self._held):
                if len(self._held) > _HEADER_LONGEST:
                    self._streaming = _StreamedCall.read_whole()
                return []
            if self._held[header.end()] != "{":
                self._streaming = _StreamedCall.read_whole()
                return []
            streaming = self._streaming = _StreamedCall(new_call_id(), header.end())
            begun: list[Piece] = [CallBegun(streaming.id, json.loads(header.group(1)))]
        else:
            begun = []
        if not streaming.streamed:
            return begun
        upto = streaming.read(self._held, upto)
        if upto <= streaming.sent:
            return begun
        piece, streaming.sent = self._held[streaming.sent : upto], upto
        return [*begun, CallArguments(piece)]


@dataclass
class _StreamedCall:
    """A call being given in pieces: its arguments from ``sent`` on are still to go, and how far a JSON value's end
    has been looked for. One that is not ``streamed`` is read whole at its end."""

    id: str
    sent: int
    streamed: bool = True
    _read: int = -1
    _depth: int = 0
    _string: bool = False
    _escaped: bool = False
    _end: int = -1  # where the arguments' object ends in the held call, once read

    @classmethod
    def read_whole(cls) -> _StreamedCall:
        """A call that is not given in pieces (its name or arguments are not in the grammar's form)."""
        return cls("", 0, streamed=False)

    def read(self, held: str, upto: int) -> int:
        """How far into ``held`` (at most ``upto``) the arguments reach, reading on from where it stopped."""
        if self._end >= 0:
            return min(self._end, upto)
        start = self.sent if self._read < 0 else self._read
        for at in range(start, upto):
            char = held[at]
            if self._string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._string = False
            elif char == '"':
                self._string = True
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self._end = at + 1
                    return self._end
        self._read = upto
        return upto


def _in_string(body: str) -> bool:
    """Whether ``body``, the start of a call's JSON, ends inside a string (an odd number of unescaped quotes)."""
    return len(re.findall(r'(?<!\\)(?:\\\\)*"', body)) % 2 == 1


def _partial_marker(text: str) -> int:
    """How many characters at the end of ``text`` could be the beginning of the opening marker."""
    for size in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-size:]):
            return size
    return 0
