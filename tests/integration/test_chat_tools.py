"""A conversation's answer with tools (ChatService with ToolUse), on the real engine with the embedded model: the
first answer made to call (the embedded model never calls on its own), the call asked about, run or refused as the
user said, the model going on after it, and every call kept with the answer across a restart; "always" asks only
once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.services.chat import TurnSaved
from app.services.container import Services
from app.services.conversations import ConversationStore
from app.services.tool_turn import ToolUse
from app.tools.consent import ConsentBook
from app.tools.loop import REFUSED, CallAsked, CallDone, Decision
from app.tools.toolbox import BUILT_IN, tools_box
from backends.base import Finished, GenerationParams

pytestmark = pytest.mark.integration


def _use(chat: Services, decision: Decision, asked: list[CallAsked]) -> ToolUse:
    def ask(call: CallAsked) -> Decision:
        asked.append(call)
        return decision

    box = tools_box([], 30.0)
    return ToolUse(box, ask, ConsentBook(chat.paths.tool_consent_file), max_calls=2, first="call")


def _params(chat: Services) -> GenerationParams:
    return dataclasses.replace(chat.generation_params(), temperature=0.0, max_new_tokens=160)


def test_an_allowed_call_runs_and_is_kept_with_the_answer(chat: Services) -> None:
    asked: list[CallAsked] = []
    events = list(chat.chat.send(None, "What is 12 times 7?", _params(chat), "", tools=_use(chat, "once", asked)))
    assert asked and asked[0].server == BUILT_IN and asked[0].tool == "calculator"
    done = [e for e in events if isinstance(e, CallDone)]
    assert done and done[0].allowed and done[0].call.id == asked[0].call.id
    assert any(isinstance(e, Finished) and e.reason in ("stop", "length") for e in events)
    saved = events[-1]
    assert isinstance(saved, TurnSaved)
    first = saved.message.tool_calls[0]
    assert (first.server, first.tool, first.allowed) == (BUILT_IN, "calculator", True)
    assert first.arguments == done[0].call.arguments and first.result == done[0].result
    store = ConversationStore(chat.paths.conversations_db)
    try:
        (summary,) = store.list()
        kept = store.get(summary.id).messages[-1]
    finally:
        store.close()
    assert kept.tool_calls == saved.message.tool_calls and kept.content == saved.message.content


def test_a_refused_call_does_not_run_and_the_model_goes_on(chat: Services) -> None:
    asked: list[CallAsked] = []
    events = list(chat.chat.send(None, "What is 12 times 7?", _params(chat), "", tools=_use(chat, "deny", asked)))
    done = [e for e in events if isinstance(e, CallDone)]
    assert done and not done[0].allowed and done[0].result == REFUSED
    assert any(isinstance(e, Finished) and e.reason in ("stop", "length") for e in events)
    saved = events[-1]
    assert isinstance(saved, TurnSaved)
    assert next((r.allowed, r.result) for r in saved.message.tool_calls) == (False, REFUSED)


def test_always_allowed_is_asked_once(chat: Services, isolated_home: Path) -> None:
    asked: list[CallAsked] = []
    list(chat.chat.send(None, "What is 2 plus 2?", _params(chat), "", tools=_use(chat, "always", asked)))
    assert len(asked) >= 1
    assert ConsentBook(chat.paths.tool_consent_file).is_allowed(BUILT_IN, "calculator")
    again: list[CallAsked] = []
    events = list(chat.chat.send(None, "What is 2 plus 2?", _params(chat), "", tools=_use(chat, "deny", again)))
    assert again == []  # allowed for good: not asked, run
    assert next(e.allowed for e in events if isinstance(e, CallDone)) is True
