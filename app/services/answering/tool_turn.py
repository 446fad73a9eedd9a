"""An answer with tools, as the page and the terminal run it: what the user allowed for it (:class:`ToolUse`), the
engine's stream fitted to the room the growing history leaves, and the calls kept with the answer
(:class:`CallLog`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from app.services.library.conversations import ToolRecord
from app.services.serving.model_handles import Lease
from app.tools.consent import ConsentBook
from app.tools.documents_tool import DocumentSearch
from app.tools.loop import DEFAULT_MAX_CALLS, Ask, CallAsked, CallDone, FirstAnswer, Stream
from app.tools.toolbox import ToolBox
from backends.base import CancelToken, ChatEvent, ChatMessage, GenerationParams, ToolSpec
from backends.tool_calls import tools_instructions
from models.shared.errors import ContextTooLong

# The tools among those given that fit a request.
Fits = Callable[[str, Sequence[ToolSpec]], Sequence[ToolSpec]]


@dataclass(frozen=True)
class ToolUse:
    """The tools offered for one answer, how each call is asked about, and how the first answer may begin."""

    box: ToolBox
    ask: Ask
    consent: ConsentBook
    max_calls: int = DEFAULT_MAX_CALLS
    first: FirstAnswer = "auto"
    # search_documents, offered in ``box`` when the chat has a collection: what it finds is numbered on from the
    # passages the answer was given, and becomes the answer's sources too.
    search: DocumentSearch | None = None
    # the tools that fit a request (app.tools.relevance), when only those are offered; not when a call comes first
    fits: Fits | None = None

    def for_request(self, request: str) -> ToolBox:
        """The tools offered for ``request``: those that fit it, or every one when a call is asked for first."""
        if self.fits is None or self.first == "call" or not self.box.offered:
            return self.box
        return self.box.keeping({spec.name for spec in self.fits(request, self.box.specs())})


def fitted_stream(engine: Lease, cancel: CancelToken, remedy: str) -> Stream:
    """The engine's stream for the tool loop: each answer may write at most what the context has room for after
    the history so far (with the tools' results in it) and the tools' descriptions."""

    def stream(history: Sequence[ChatMessage], wanted: GenerationParams) -> Iterator[ChatEvent]:
        room = engine.context_length - engine.count_chat_tokens(history) - tools_tokens(engine, wanted)
        if room < 1:
            raise ContextTooLong("The conversation with the tools' results no longer fits the context window.", remedy)
        fitted = dataclasses.replace(wanted, max_new_tokens=min(wanted.max_new_tokens, room))
        return engine.stream_chat(history, fitted, cancel)

    return stream


def tools_tokens(engine: Lease, params: GenerationParams) -> int:
    """About what offering the tools adds to the prompt (a template may word them a little differently)."""
    return engine.count_tokens(tools_instructions(params.tools)) if params.tools else 0


@dataclass
class CallLog:
    """The calls of one answer as they are kept with it: each asked-about call completed by its result."""

    records: list[ToolRecord] = field(default_factory=list)
    _asked: dict[str, CallAsked] = field(default_factory=dict)

    def take(self, event: object) -> None:
        if isinstance(event, CallAsked):
            self._asked[event.call.id] = event
        elif isinstance(event, CallDone):
            asked = self._asked.pop(event.call.id, None)
            server, tool = (asked.server, asked.tool) if asked is not None else ("", event.call.name)
            self.records.append(
                ToolRecord(
                    event.call.name, server, tool, event.call.arguments, event.allowed, event.result, event.is_error
                )
            )
