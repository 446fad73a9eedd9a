"""Where a tool call waits on the page (app/ui/call_gate.py): the tab's decision reaches the waiting answer, a
decision with nothing waiting is refused, and a stopped answer refuses its call."""

from __future__ import annotations

import threading

from app.tools.loop import CallAsked, Decision
from app.ui.call_gate import CallGate
from backends.base import CancelToken, ToolCall

ASKED = CallAsked(ToolCall("call_1", "calculator", '{"expression": "6*7"}'), "built-in", "calculator")


def _asking(gate: CallGate, key: str, cancel: CancelToken) -> tuple[threading.Thread, list[Decision]]:
    decided: list[Decision] = []
    thread = threading.Thread(target=lambda: decided.append(gate.ask(key, ASKED, cancel)))
    thread.start()
    while gate.waiting(key) is None:
        threading.Event().wait(0.01)
    return thread, decided


def test_the_tabs_decision_reaches_its_call_only() -> None:
    gate = CallGate(poll_s=0.01)
    thread, decided = _asking(gate, "tab-a", CancelToken())
    assert gate.decide("tab-b", "once") is None  # another tab has nothing waiting
    assert gate.decide("tab-a", "always") == ASKED
    assert gate.decide("tab-a", "deny") is None  # pressed twice: the first word stands
    thread.join(5)
    assert decided == ["always"] and gate.waiting("tab-a") is None


def test_a_stopped_answer_refuses_its_call() -> None:
    gate = CallGate(poll_s=0.01)
    cancel = CancelToken()
    thread, decided = _asking(gate, "tab-a", cancel)
    cancel.cancel()
    thread.join(5)
    assert decided == ["deny"]
    assert gate.decide("tab-a", "once") is None  # too late: nothing waits


def test_a_press_answers_the_call_it_was_shown_beside_and_never_a_later_one() -> None:
    from app.ui.render import call_question, shown_call_id

    question = call_question(ASKED)
    assert "call_1" not in question.split("<!--")[0]  # the id rides along unseen
    assert shown_call_id(question) == "call_1" and shown_call_id("") is None
    gate = CallGate(poll_s=0.01)
    thread, decided = _asking(gate, "tab-a", CancelToken())
    assert gate.decide("tab-a", "deny", "call_0") is None  # meant for the call before: this one stays waiting
    assert gate.waiting("tab-a") == ASKED
    assert gate.decide("tab-a", "once", shown_call_id(question)) == ASKED
    thread.join(5)
    assert decided == ["once"]
