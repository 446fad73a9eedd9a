"""MCP servers kept running between uses: a server is started at its first use (listing its
tools, or a call), and the same session serves every use after it, so a server that keeps state between calls (an
open browser page, a memory) keeps it, and a call does not pay for the server's start. A session that fails —
the server crashed, hung past the time limit, or broke the protocol — is ended (its whole process group with it),
and the next use starts the server again. A session not used for ``IDLE_CLOSE_S`` is ended; every one is ended when
Hearth stops.

The sessions live on one event loop in a thread of their own; a use waits for its answer there, and gives up at
the time limit, when its ``cancel`` token is set (Stop in the page), or on Ctrl+C — each of which ends that
session, since the server may still be busy with the call.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import dataclasses
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from typing import IO, Any

from app.tools.servers import ServerEntry
from backends.base import CancelToken

Work = Callable[[Any], Awaitable[Any]]
Opener = Callable[[ServerEntry, float, IO[str]], Any]

IDLE_CLOSE_S = 600.0
# How often a waiting use looks at its cancel token.
POLL_S = 0.1
# How long ending the sessions may take when Hearth stops (each server gets a moment, then its group is killed).
CLOSE_WAIT_S = 15.0


class UseCancelled(Exception):
    """The use was cancelled (Stop) before the server answered; the session was ended."""


class UseTimedOut(Exception):
    """The server did not answer within the time limit; the session was ended."""


class SessionEnded(Exception):
    """The session was ended (another use of it was given up, or Hearth is stopping) before this use ran."""

    def __init__(self) -> None:
        super().__init__(
            "its session was ended before it answered (another call to it was stopped, or Hearth is stopping)"
        )


class SessionFailed(Exception):
    """A use failed (``cause``: what the work or the session raised, or :class:`UseTimedOut`); the session was
    ended. ``printed``: the end of what the server wrote on its error stream, for the message."""

    def __init__(self, cause: BaseException, printed: str) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.printed = printed


class _Session:
    """One server's session, served by one task: uses are taken from a queue, one at a time, in order."""

    def __init__(self, entry: ServerEntry, timeout_s: float, idle_close_s: float, opener: Opener) -> None:
        self.entry = entry
        # What the server prints on its error stream, for the message if it fails (closed when the session is ended).
        self.errors: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self.queue: asyncio.Queue[tuple[Work, asyncio.Future[Any]] | None] = asyncio.Queue()
        self.ended = False
        self.task = asyncio.get_running_loop().create_task(self._serve(timeout_s, idle_close_s, opener))

    async def _serve(self, timeout_s: float, idle_close_s: float, opener: Opener) -> None:
        current: asyncio.Future[Any] | None = None
        try:
            async with opener(self.entry, timeout_s, self.errors) as client:
                while True:
                    try:
                        request = await asyncio.wait_for(self.queue.get(), idle_close_s)
                    except TimeoutError:
                        return  # unused for a while: the server is ended, and started again when next needed
                    if request is None:
                        return
                    work, current = request
                    if current.done():  # its caller gave up while it waited in the queue
                        continue
                    result = await work(client)
                    if not current.done():
                        current.set_result(result)
                    current = None
        except BaseException as exc:
            # Ended from outside (a use given up, Hearth stopping): the calls still waiting on it are told so.
            failure = exc if isinstance(exc, Exception) else SessionEnded()
            for waiting in [current, *self._drain()]:
                if waiting is not None and not waiting.done():
                    waiting.set_exception(failure)
            if not isinstance(exc, Exception):
                raise
        finally:
            self.ended = True
            for waiting in self._drain():
                if not waiting.done():
                    waiting.set_exception(SessionEnded())

    def _drain(self) -> list[asyncio.Future[Any]]:
        drained = []
        while not self.queue.empty():
            request = self.queue.get_nowait()
            if request is not None:
                drained.append(request[1])
        return drained


class ServerPool:
    """The running MCP sessions of this process, one per server (as added: a changed entry is another server)."""

    def __init__(self, opener: Opener, idle_close_s: float = IDLE_CLOSE_S) -> None:
        self._opener = opener
        self._idle_close_s = idle_close_s
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions: dict[ServerEntry, _Session] = {}

    def use(self, entry: ServerEntry, timeout_s: float, work: Work, cancel: CancelToken | None = None) -> Any:
        """``work(client)`` on the server's session (started first if need be), within ``timeout_s``. Raises
        :class:`SessionFailed` or :class:`UseCancelled` (and lets Ctrl+C through), the session ended each time."""
        loop = self._running_loop()
        key = dataclasses.replace(entry, enabled=True)
        holder: list[_Session] = []
        answer = asyncio.run_coroutine_threadsafe(self._call(key, timeout_s, work, holder), loop)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    return answer.result(timeout=POLL_S)
                except concurrent.futures.TimeoutError:
                    if cancel is not None and cancel.cancelled:
                        raise UseCancelled() from None
                    if time.monotonic() >= deadline:
                        raise UseTimedOut() from None
        except BaseException as exc:  # the server's state is unknown (or it failed): this session goes
            answer.cancel()
            printed = self._end(holder[0]) if holder else ""
            if isinstance(exc, UseCancelled) or not isinstance(exc, Exception):
                raise
            raise SessionFailed(exc, printed) from exc

    async def _call(self, key: ServerEntry, timeout_s: float, work: Work, holder: list[_Session]) -> Any:
        session = self._sessions.get(key)
        if session is None or session.ended:
            session = _Session(key, timeout_s, self._idle_close_s, self._opener)
            self._sessions[key] = session
        holder.append(session)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        session.queue.put_nowait((work, answer))
        return await answer

    def _end(self, session: _Session) -> str:
        """End ``session`` now (its server with it), wait until it has ended, and give the end of what the server
        printed on its error stream."""
        loop = self._loop

        async def ending() -> None:
            if self._sessions.get(session.entry) is session:
                del self._sessions[session.entry]
            session.task.cancel()
            with contextlib.suppress(BaseException):
                await session.task

        if loop is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(ending(), loop).result(timeout=CLOSE_WAIT_S)
        try:
            session.errors.flush()
            session.errors.seek(0)
            return session.errors.read()[-20_000:]
        except (OSError, ValueError):
            return ""
        finally:
            with contextlib.suppress(OSError):
                session.errors.close()

    def keep_only(self, entries: list[ServerEntry]) -> None:
        """End the sessions of servers not among ``entries`` that are on (removed, switched off, or changed)."""
        wanted = {dataclasses.replace(e, enabled=True) for e in entries if e.enabled}
        for key, session in list(self._sessions.items()):
            if key not in wanted:
                self._end(session)

    def running(self) -> list[ServerEntry]:
        """The servers with a session open now."""
        return [entry for entry, session in list(self._sessions.items()) if not session.ended]

    def close(self) -> None:
        """End every session (each server's process group with it) and the loop. Safe to call more than once."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return

        async def ending() -> None:
            sessions = list(self._sessions.values())
            self._sessions.clear()
            for session in sessions:
                session.task.cancel()
            await asyncio.gather(*(s.task for s in sessions), return_exceptions=True)
            for session in sessions:
                with contextlib.suppress(OSError):
                    session.errors.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(ending(), loop).result(timeout=CLOSE_WAIT_S)
        loop.call_soon_threadsafe(loop.stop)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=run, name="hearth-mcp-sessions", daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop


_POOL: ServerPool | None = None
_POOL_LOCK = threading.Lock()


def shared_pool(opener: Opener) -> ServerPool:
    """This process's pool (made at first use, closed when the process ends)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ServerPool(opener)
            atexit.register(_POOL.close)
        return _POOL
