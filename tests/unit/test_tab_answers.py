"""Each browser tab writes one answer at a time, Stop stops only its own, and switching waits for the stopped
answer to end (app/ui/tab_answers.py)."""

from __future__ import annotations

import threading
import time

from app.ui.tab_answers import TabAnswers


def test_a_tab_writes_one_answer_at_a_time_and_stops_only_its_own() -> None:
    tabs = TabAnswers()
    first = tabs.claim("a")
    assert first is not None and tabs.writing("a")
    assert tabs.claim("a") is None  # its answer is still being written
    other = tabs.claim("b")
    assert other is not None
    tabs.stop("a")
    assert first.cancelled and not other.cancelled
    tabs.release("a")
    again = tabs.claim("a")
    assert again is not None and not again.cancelled and not tabs.writing("c")
    tabs.stop("c")  # a tab with no answer: nothing to stop


def test_switching_stops_the_answer_and_waits_until_it_has_ended() -> None:
    tabs = TabAnswers(wait_s=30)
    token = tabs.claim("a")
    assert token is not None
    ended: list[bool] = []

    def answer() -> None:
        deadline = time.monotonic() + 30
        while not token.cancelled and time.monotonic() < deadline:  # written until it is stopped
            time.sleep(0.01)
        ended.append(token.cancelled)
        tabs.release("a")

    writer = threading.Thread(target=answer)
    writer.start()
    tabs.stop_and_wait("a")
    assert ended == [True] and not tabs.writing("a")  # back only once the answer had ended
    writer.join()
    tabs.stop_and_wait("b")  # nothing being written: returns at once
