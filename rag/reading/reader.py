"""Read documents in a separate process, so that no document can exhaust the memory of the process that indexes it,
hold the documents queue, or ignore Cancel.

One child process (``python -m rag.reading.reader_worker``) reads one file per request. A file that needs more memory
than allowed fails there (RLIMIT_AS; where the system lacks it, the parent watches the child's resident size), and that
child ends; a file that takes longer than allowed, or whose ingestion is cancelled, is stopped by killing the child. The
next file gets a fresh child. A child is started on first use and reused for every file after it, so a folder of many
small files pays the start once; it ends after a minute without work, or with :meth:`ReaderProcess.close`."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Protocol, TypeVar

from backends.base import CancelToken
from backends.child_env import child_environment
from models.shared.errors import HearthError
from rag.reading.limits import ReadLimits, too_much_memory, too_slow
from rag.reading.reader_protocol import ReadProgress, ReadReply, ReadRequest, Start
from rag.reading.sections import Section, Skipped

log = logging.getLogger(__name__)

# How often a waiting read looks at Cancel, the clock and the child's memory.
POLL_S = 0.05
# How often a read tells its caller how far it has got (so that a page can show the time passing, too).
TICK_S = 0.25
IDLE_CLOSE_S = 60.0
# Loggers whose warnings only add noise unless Hearth runs verbosely (Hearth reports damaged files itself).
QUIET_LOGGERS = ("pypdf",)


class ReadCancelled(Exception):
    """Cancel reached this file while it was being read; nothing about the file is recorded."""


class ReaderUnavailable(HearthError):
    """The process that reads documents cannot be started."""


class DocumentReader(Protocol):
    def read(self, path: Path, cancel: CancelToken) -> list[Section]:
        """The sections of ``path``; :class:`Skipped` with the reason, or :class:`ReadCancelled`."""

    def reading(self, path: Path, cancel: CancelToken) -> Generator[ReadProgress, None, list[Section]]:
        """:meth:`read`, telling how far it has got as it goes."""

    def close(self) -> None: ...


_Result = TypeVar("_Result")


def drain(steps: Generator[object, None, _Result]) -> _Result:
    """What a generator returns, its progress ignored."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


_Step = TypeVar("_Step")


def relay(
    reading: Generator[ReadProgress, None, list[Section]], step: Callable[[ReadProgress], _Step]
) -> Generator[_Step, None, list[Section]]:
    """A read's sections, yielding ``step(progress)`` for each of its progress reports; the read is stopped if the
    caller stops before it ends."""
    try:
        while True:
            try:
                read = next(reading)
            except StopIteration as done:
                sections: list[Section] = done.value
                return sections
            yield step(read)
    finally:
        reading.close()


class _Child:
    def __init__(self, process: subprocess.Popen[bytes], conn: Connection) -> None:
        self.process = process
        self.conn = conn

    def resident_bytes(self) -> int:
        import psutil

        try:
            return int(psutil.Process(self.process.pid).memory_info().rss)
        except psutil.Error:
            return 0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError):
            self.conn.close()


class ReaderProcess:
    """Reads files one at a time in a child process, within ``limits`` (time and memory per file among them)."""

    def __init__(self, limits: ReadLimits | None = None, idle_close_s: float = IDLE_CLOSE_S) -> None:
        self.limits = limits or ReadLimits()
        self._idle_close_s = idle_close_s
        self._busy = threading.Lock()  # one read at a time
        self._state = threading.Lock()  # guards the fields below
        self._child: _Child | None = None
        self._idle_timer: threading.Timer | None = None
        self._closing = False
        self.started = 0  # child processes started so far

    def read(self, path: Path, cancel: CancelToken) -> list[Section]:
        return drain(self.reading(path, cancel))

    def reading(self, path: Path, cancel: CancelToken) -> Generator[ReadProgress, None, list[Section]]:
        """Read ``path``, yielding how far it has got (pages, where the loader counts them) at least every
        ``TICK_S`` while it reads, and return its sections."""
        while not self._busy.acquire(timeout=POLL_S):  # another ingestion is reading a file: wait, unless cancelled
            if cancel.cancelled:
                raise ReadCancelled
        try:
            self._cancel_idle_timer()
            self._closing = False
            request = ReadRequest(str(path), self.limits)
            child = self._ready_child()
            try:
                try:
                    child.conn.send(request)
                except OSError:  # it ended a moment ago: once more, with a fresh one
                    self._discard()
                    child = self._start()
                    child.conn.send(request)
                reply = yield from self._wait(child, cancel)
            except BaseException:
                # Cancelled, refused, or the consumer stopped listening (a generator closed mid-read): the child may
                # be in the middle of the file, so it goes.
                self._discard()
                raise
            if reply.restart:
                self._discard()
            if reply.reason is not None:
                raise Skipped(reply.reason)
            return reply.sections
        finally:
            self._busy.release()
            self._schedule_idle_close()

    def close(self) -> None:
        """Stop the child now (a read in progress ends as cancelled). Safe to call more than once."""
        self._closing = True
        self._cancel_idle_timer()
        self._discard()

    def _wait(self, child: _Child, cancel: CancelToken) -> Generator[ReadProgress, None, ReadReply]:
        deadline = time.monotonic() + self.limits.timeout_s
        progress = ReadProgress()
        told = time.monotonic()
        yield progress
        while True:
            # Cancel, the clock and memory are checked on every round, however busily the child reports progress.
            if cancel.cancelled or self._closing:
                raise ReadCancelled
            if child.conn.poll(POLL_S):
                try:
                    message = child.conn.recv()
                except (EOFError, OSError):
                    raise self._ended(child) from None
                if isinstance(message, ReadReply):
                    return message
                if not isinstance(message, ReadProgress):
                    raise Skipped("the process reading it answered nonsense; it was not indexed")
                progress = message
            elif child.process.poll() is not None:
                raise self._ended(child)
            if time.monotonic() > deadline:
                raise Skipped(too_slow(self.limits))
            if child.resident_bytes() > self.limits.memory_bytes:
                raise Skipped(too_much_memory(self.limits))
            if time.monotonic() - told >= TICK_S:
                told = time.monotonic()
                yield progress

    def _ended(self, child: _Child) -> Exception:
        """Why the child ended without answering, as the file's reason (or a cancel, when Hearth stopped it)."""
        if self._closing:
            return ReadCancelled()
        try:
            code = child.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return Skipped("the process reading it stopped answering; it was not indexed")
        if code < 0 and -code == getattr(signal, "SIGXCPU", None):
            return Skipped(too_slow(self.limits))
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            killed = -code == getattr(signal, "SIGKILL", None)
            how = f"{name}, perhaps the system ran out of memory" if killed else name
        else:
            how = f"exit code {code}"
        return Skipped(
            f"the process reading it stopped ({how}); it was not indexed. The file may be damaged or built to "
            "exhaust readers"
        )

    def _ready_child(self) -> _Child:
        """The child, alive: one that ended while idle (killed from outside, say) is replaced first."""
        child = self._child
        if child is not None and child.process.poll() is None:
            return child
        if child is not None:
            log.info(
                "document reader process %d had ended (%s); starting another",
                child.process.pid,
                child.process.returncode,
            )
            self._discard()
        return self._start()

    def _start(self) -> _Child:
        ours, theirs = socket.socketpair()
        env = child_environment()
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "rag.reading.reader_worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        except OSError as exc:
            ours.close()
            raise ReaderUnavailable(
                f"Could not start the process that reads documents: {exc}.",
                "Check that Hearth's Python is still installed, then add the documents again.",
            ) from exc
        finally:
            theirs.close()
        child = _Child(process, Connection(ours.detach()))
        quiet = QUIET_LOGGERS if not log.isEnabledFor(logging.INFO) else ()
        child.conn.send(Start(self.limits.memory_bytes, logging.getLogger().getEffectiveLevel(), quiet))
        with self._state:
            self._child = child
        self.started += 1
        log.info("document reader process %d started", process.pid)
        return child

    def _discard(self) -> None:
        with self._state:
            child, self._child = self._child, None
        if child is not None:
            child.stop()

    def _schedule_idle_close(self) -> None:
        timer = threading.Timer(self._idle_close_s, self._close_if_idle)
        timer.daemon = True
        with self._state:
            self._idle_timer = timer
        timer.start()

    def _cancel_idle_timer(self) -> None:
        with self._state:
            timer, self._idle_timer = self._idle_timer, None
        if timer is not None:
            timer.cancel()

    def _close_if_idle(self) -> None:
        if self._busy.acquire(blocking=False):
            try:
                self._discard()
            finally:
                self._busy.release()
