"""The tool loop for the page and the terminal: the model answers with the tools
offered; each call it makes is shown and asked about (unless always allowed), run, and its result given back,
and the model goes on, until it answers without a call.

When the model makes the same call with the same arguments twice in a row, or passes an earlier result back as
an argument (small models do both, instead of reading the result), or after ``max_calls`` calls, the loop says so
in a note and the model answers once more without tools, from the results it has. A refused call goes back to the
model as "the user did not allow this call", and the model answers that in text, without tools: offered them again,
a small model calls again or writes out the tool list. Stop reaches the engine through the caller's token; a
running tool call is bounded by its own time limit.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from app.tools.consent import ConsentBook
from app.tools.toolbox import ToolBox
from backends.base import ChatEvent, ChatMessage, Finished, GenerationParams, Reading, TextDelta, ToolCall, Usage
from backends.tool_calls import calls_grammar, calls_in

Decision = Literal["once", "always", "deny"]
FirstAnswer = Literal["auto", "call"]
DEFAULT_MAX_CALLS = 8
REFUSED = "The user did not allow this call."


@dataclass(frozen=True)
class CallAsked:
    """A call the model made, about to be asked about, or run at once when the user allowed its tool for good
    (``asking`` False)."""

    call: ToolCall
    server: str
    tool: str
    asking: bool = True
    decided: bool = False  # the user allowed it just now, and it runs (after the one that asked)


@dataclass(frozen=True)
class CallDone:
    call: ToolCall
    allowed: bool
    result: str
    is_error: bool


@dataclass(frozen=True)
class LoopNote:
    text: str


LoopEvent = TextDelta | CallAsked | CallDone | LoopNote | Usage | Finished | Reading
Stream = Callable[[Sequence[ChatMessage], GenerationParams], Iterator[ChatEvent]]
Ask = Callable[[CallAsked], Decision]


def answer_with_tools(
    stream: Stream,
    messages: Sequence[ChatMessage],
    params: GenerationParams,
    box: ToolBox,
    ask: Ask,
    consent: ConsentBook,
    max_calls: int = DEFAULT_MAX_CALLS,
    first: FirstAnswer = "auto",
) -> Generator[LoopEvent, None, None]:
    """``first``: whether the model's first answer may be text ("auto") or must be a call ("call"; the user asked
    for one, for example because a small model would not call on its own); after it, the model decides."""
    history = list(messages)
    offered = dataclasses.replace(
        params, tools=box.specs(), grammar=calls_grammar(box.specs(), None, False, True) if box.offered else None
    )
    must_call = (
        dataclasses.replace(offered, grammar=calls_grammar(box.specs(), None, True, False)) if box.offered else offered
    )
    plain = dataclasses.replace(params, tools=(), grammar=None)
    made = 0
    last: tuple[str, str] | None = None
    repeated: str | None = None  # the tool the model asked for again with the same arguments
    echoed: str | None = None  # the tool the model gave an earlier result to
    refused = False  # the user did not allow a call: the model answers that without tools
    results: list[str] = []
    while True:
        tools_on = made < max_calls and bool(box.offered) and repeated is None and echoed is None and not refused
        wanted = (must_call if first == "call" and made == 0 else offered) if tools_on else plain
        text, calls, finished = yield from _one_answer(stream, history, wanted)
        if not calls or not tools_on or (finished is not None and finished.reason == "cancelled"):
            if finished is not None:  # answered (a call written without tools offered is not run), or Stop
                yield finished
            return
        fresh: list[ToolCall] = []
        for call in calls:
            if (call.name, call.arguments) == last:
                repeated = call.name
                break
            if echoes_a_result(call, results):
                echoed = call.name
                break
            fresh.append(call)
            last = (call.name, call.arguments)
        if fresh:
            history.append(ChatMessage("assistant", text, tuple(fresh)))
        for call in fresh:
            made += 1
            result, denied = yield from _run(call, box, ask, consent)
            refused = refused or denied
            results.append(result)
            history.append(ChatMessage("tool", result, tool_call_id=call.id))
        if repeated is not None:
            yield LoopNote(
                f"The model asked for {repeated} with the same arguments again; it answers from what it has, "
                "without tools."
            )
        elif echoed is not None:
            yield LoopNote(
                f"The model passed an earlier result back to {echoed}; it answers from what it has, without tools."
            )
        elif made >= max_calls:
            yield LoopNote(
                f"{made} tool calls were made, the most for one answer; the model answers without tools now."
            )


# A result this long found inside a call's arguments was copied there, not arrived at (shorter ones, numbers above
# all, are fair inputs to the next step: "83810205 / 5").
ECHO_MIN_CHARS = 12


def echoes_a_result(call: ToolCall, results: Sequence[str]) -> bool:
    """Whether ``call`` gives an earlier result back: an argument that is one of ``results`` (letter case, spaces and
    end punctuation aside), or that holds a long one whole."""
    values = [_plain(value) for value in _strings(call.arguments)]
    for result in map(_plain, results):
        if result and any(value == result or (len(result) >= ECHO_MIN_CHARS and result in value) for value in values):
            return True
    return False


def _strings(arguments: str) -> list[str]:
    """The string values in a call's JSON arguments, at any depth (the text itself when it is not JSON)."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return [arguments]
    found: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return found


def _plain(text: str) -> str:
    return " ".join(text.split()).strip(" .,;:!?\"'").casefold()


def _one_answer(
    stream: Stream, history: Sequence[ChatMessage], params: GenerationParams
) -> Generator[LoopEvent, None, tuple[str, list[ToolCall], Finished | None]]:
    """One answer of the model: its text streamed out, its calls collected (a call cut off after complete ones is
    dropped), and how it finished."""
    said: list[str] = []
    calls: list[ToolCall] = []
    finished: Finished | None = None
    for item in calls_in(stream(history, params)):
        if isinstance(item, ToolCall):
            calls.append(item)
        elif isinstance(item, Finished):
            finished = item
        else:
            if isinstance(item, TextDelta):
                said.append(item.text)
            yield item
    return "".join(said), calls, finished


def _run(call: ToolCall, box: ToolBox, ask: Ask, consent: ConsentBook) -> Generator[LoopEvent, None, tuple[str, bool]]:
    """The call asked about and run: its result for the model, and whether the user denied it."""
    tool = box.find(call.name)
    if tool is None:
        result, failed = box.run(call)  # says there is no such tool
        yield CallDone(call, False, result, failed)
        return result, False
    allowed = consent.is_allowed(tool.server, tool.tool)
    asked = CallAsked(call, tool.server, tool.tool, asking=not allowed)
    yield asked
    decision: Decision = "once" if allowed else ask(asked)
    if decision == "deny":
        yield CallDone(call, False, REFUSED, True)
        return REFUSED, True
    if decision == "always":
        consent.allow(tool.server, tool.tool)
    if not allowed:  # it runs now: the page stops asking about it
        yield CallAsked(call, tool.server, tool.tool, asking=False, decided=True)
    result, failed = box.run(call)
    yield CallDone(call, True, result, failed)
    return result, False
