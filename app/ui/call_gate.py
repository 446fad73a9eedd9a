"""Where a tool call waits for the user on the page: the answer's thread asks and waits; the
buttons under the chat (Allow once, Always allow this tool, Deny) answer from the page's own handlers. One call
waits at a time per browser tab; Stop, or the tab going away, refuses it. Nothing a tool returns reaches here: only
the page's buttons decide."""

from __future__ import annotations

import threading

from app.tools.loop import CallAsked, Decision
from backends.base import CancelToken

# How often a waiting call looks whether its answer was stopped.
POLL_S = 0.1


class CallGate:
    def __init__(self, poll_s: float = POLL_S) -> None:
        self._poll_s = poll_s
        self._changed = threading.Condition()
        self._waiting: dict[str, CallAsked] = {}
        self._decided: dict[str, Decision] = {}

    def ask(self, key: str, asked: CallAsked, cancel: CancelToken) -> Decision:
        """Wait for the decision of the tab ``key`` on ``asked``; "deny" once ``cancel`` is set."""
        with self._changed:
            self._waiting[key] = asked
            self._decided.pop(key, None)
            try:
                while key not in self._decided and not cancel.cancelled:
                    self._changed.wait(self._poll_s)
                return self._decided.pop(key, "deny")
            finally:
                del self._waiting[key]

    def decide(self, key: str, decision: Decision, call_id: str | None = None) -> CallAsked | None:
        """The tab's decision on the call it shows (``call_id``, when given, must be the one waiting); None when
        no such call of that tab is waiting (the answer was stopped, the button was pressed twice, or the press
        was meant for a call already answered)."""
        with self._changed:
            asked = self._waiting.get(key)
            if asked is None or key in self._decided or (call_id is not None and asked.call.id != call_id):
                return None
            self._decided[key] = decision
            self._changed.notify_all()
            return asked

    def waiting(self, key: str) -> CallAsked | None:
        with self._changed:
            return self._waiting.get(key)
