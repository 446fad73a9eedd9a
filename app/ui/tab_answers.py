"""Which browser tabs are writing an answer now. Each tab (Gradio session) writes at most one answer at a time and
Stop stops only its own; opening another conversation stops the tab's answer and waits until it has ended and been
saved, so the answer never draws over the conversation the user switched to."""

from __future__ import annotations

import threading

from backends.base import CancelSlot, CancelToken

# How long switching conversations waits for the stopped answer to end and be saved (one engine step, normally).
SWITCH_WAIT_S = 10.0


class TabAnswers:
    def __init__(self, wait_s: float = SWITCH_WAIT_S) -> None:
        self._slots: dict[str, CancelSlot] = {}  # one cancel slot per tab
        self._writing: set[str] = set()  # tabs whose answer is being written now
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)
        self._wait_s = wait_s

    def claim(self, key: str) -> CancelToken | None:
        """A fresh cancel token for this tab's next answer, or None while its previous one is written."""
        with self._lock:
            if key in self._writing:
                return None
            self._writing.add(key)
            return self._slots.setdefault(key, CancelSlot()).start()

    def release(self, key: str) -> None:
        """This tab's answer has ended (and been saved)."""
        with self._lock:
            self._writing.discard(key)
            self._ended.notify_all()

    def writing(self, key: str) -> bool:
        with self._lock:
            return key in self._writing

    def stop(self, key: str) -> None:
        """Stop this tab's answer, if it has one; returns at once."""
        with self._lock:
            slot = self._slots.get(key)
        if slot is not None:
            slot.cancel()

    def stop_and_wait(self, key: str) -> None:
        """Stop this tab's answer, if one is being written, and wait until it has ended and been saved."""
        with self._lock:
            if key not in self._writing:
                return
            self._slots[key].cancel()
            self._ended.wait_for(lambda: key not in self._writing, self._wait_s)
