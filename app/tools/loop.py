"""The tool loop for the page and the terminal (issue 36, items 5 and 6): the model answers with the tools
offered; each call it makes is shown and asked about (unless always allowed), run, and its result given back,
and the model goes on, until it answers without a call.

It ends early, with a note, when the model makes the same call with the same arguments twice in a row, or after
``max_calls`` calls (then the model answers once more without tools). A refused call goes back to the model as
"the user did not allow this call". Stop reaches the engine through the caller's token; a running tool call is
bounded by its own time limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from app.tools.consent import ConsentBook
from app.tools.toolbox import ToolBox
from backends.base import ChatEvent, ChatMessage, Finished, GenerationParams, TextDelta, ToolCall, Usage
from backends.tool_calls import calls_grammar, calls_in

Decision = Literal["once", "always", "deny"]
DEFAULT_MAX_CALLS = 8
REFUSED = "The user did not allow this call."


@dataclass(frozen=True)
class CallAsked:
    """A call the model made, about to be asked about (or run, when always allowed)."""

    call: ToolCall
    server: str
    tool: str


@dataclass(frozen=True)
class CallDone:
    call: ToolCall
    allowed: bool
    result: str
    is_error: bool


@dataclass(frozen=True)
class LoopNote:
    text: str


LoopEvent = TextDelta | CallAsked | CallDone | LoopNote | Usage | Finished
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
) -> Generator[LoopEvent, None, None]:
    history = list(messages)
    offered = dataclasses.replace(
        params, tools=box.specs(), grammar=calls_grammar(box.specs(), None, False, True) if box.offered else None
    )
    made = 0
    last: tuple[str, str] | None = None
    while True:
        turn = offered if made < max_calls and box.offered else dataclasses.replace(params, tools=(), grammar=None)
        text, calls, finished = yield from _one_answer(stream, history, turn)
        if not calls or (finished is not None and finished.reason == "cancelled"):  # answered, or Stop
            if finished is not None:
                yield finished
            return
        history.append(ChatMessage("assistant", text, tuple(calls)))
        for call in calls:
            if (call.name, call.arguments) == last:
                yield LoopNote(f"The model asked for {call.name} with the same arguments again; the answer ends here.")
                yield Finished("stop")
                return
            last = (call.name, call.arguments)
            made += 1
            history.append(ChatMessage("tool", (yield from _run(call, box, ask, consent)), tool_call_id=call.id))
        if made >= max_calls:
            yield LoopNote(
                f"{made} tool calls were made, the most for one answer; the model answers without tools now."
            )


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


def _run(call: ToolCall, box: ToolBox, ask: Ask, consent: ConsentBook) -> Generator[LoopEvent, None, str]:
    tool = box.find(call.name)
    if tool is None:
        result, failed = box.run(call)  # says there is no such tool
        yield CallDone(call, False, result, failed)
        return result
    asked = CallAsked(call, tool.server, tool.tool)
    yield asked
    decision: Decision = "once" if consent.is_allowed(tool.server, tool.tool) else ask(asked)
    if decision == "deny":
        yield CallDone(call, False, REFUSED, True)
        return REFUSED
    if decision == "always":
        consent.allow(tool.server, tool.tool)
    result, failed = box.run(call)
    yield CallDone(call, True, result, failed)
    return result
