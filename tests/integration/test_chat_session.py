"""`hearth chat` with no question, through a real pseudo-terminal: questions typed in turn are
one conversation, saved; Ctrl+C stops an answer and keeps what was written, and the conversation goes on; Ctrl+D
leaves. The embedded model answers."""

from __future__ import annotations

import json
import os
import pty
import select
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


class Terminal:
    """`hearth chat` on the child side of a pseudo-terminal, as a person at a terminal runs it."""

    def __init__(self, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HEARTH_")} | {"HEARTH_HOME": str(home)}
        env["TERM"] = "dumb"
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: its own session, the terminal its controlling one
            os.execve(sys.executable, [sys.executable, "-m", "app", "chat", "--max-tokens", "200"], env)
        self.seen = ""

    def read_until(self, text: str, timeout_s: float = 120, after: str = "") -> str:
        """What the terminal showed, once ``text`` is shown (after the last ``after``, when given)."""
        return self._wait(lambda: self._shown(text, after), timeout_s, repr(text))

    def read_words(self, after: str, count: int, timeout_s: float = 120) -> str:
        """What the terminal showed, once ``count`` words follow the line that ends with ``after`` (an answer is
        being written: waiting a fixed time is not enough on a busy machine)."""

        def written() -> bool:
            if after not in self.seen:
                return False
            rest = self.seen.rsplit(after, 1)[-1].split("\n", 1)
            return len(rest) == 2 and len(rest[1].split()) >= count

        return self._wait(written, timeout_s, f"{count} words after {after!r}")

    def _wait(self, shown: Callable[[], bool], timeout_s: float, what: str) -> str:
        deadline = time.monotonic() + timeout_s
        while not shown():
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {what}; the terminal shows:\n{self.seen[-3000:]}"
            ready, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536).decode("utf-8", errors="replace")
                except OSError:  # the child ended and closed its side
                    break
        assert shown(), f"never saw {what}; the terminal shows:\n{self.seen[-3000:]}"
        return self.seen

    def _shown(self, text: str, after: str) -> bool:
        if after and after not in self.seen:
            return False
        return text in (self.seen.rsplit(after, 1)[-1] if after else self.seen)

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def exit_code(self, timeout_s: float = 30) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:  # keep the child's output flowing, so it never blocks on a full terminal
                os.read(self.fd, 65536)
            except OSError:
                time.sleep(0.1)
        os.kill(self.pid, 9)
        raise AssertionError("hearth chat did not end")


def test_a_conversation_in_the_terminal_with_stop_and_leave(isolated_home: Path, embedded_model: Path) -> None:
    terminal = Terminal(isolated_home)
    terminal.read_until("you> ", timeout_s=180)
    terminal.type("What is the capital of France?\n")
    terminal.read_until("you> ", timeout_s=120, after="tokens/s]")
    terminal.type("Write a very long story about a lighthouse keeper and the sea.\n")
    terminal.read_words(after="and the sea.", count=3)  # the answer is being written
    terminal.type("\x03")  # Ctrl+C
    terminal.read_until("you> ", timeout_s=60, after="[stopped: what was written is kept]")
    terminal.type("\x04")  # Ctrl+D
    assert terminal.exit_code() == 0

    with sqlite3.connect(isolated_home / "conversations.db") as db:
        conversations = db.execute("SELECT id FROM conversations").fetchall()
        rows = db.execute("SELECT role, content, stats FROM messages ORDER BY id").fetchall()
    assert len(conversations) == 1  # both questions in one conversation
    assert [role for role, _, _ in rows] == ["user", "assistant", "user", "assistant"]
    assert json.loads(rows[1][2])["finish_reason"] in ("stop", "length")
    assert json.loads(rows[3][2])["finish_reason"] == "cancelled" and rows[3][1].strip()
