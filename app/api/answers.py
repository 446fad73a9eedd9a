"""One answer, written on a thread of its own and read by the event loop.

The engine's interface is blocking (a lease, then an iterator of events), and an answer can wait for a slot,
so each request gets its own thread rather than a place in the shared thread pool, where long answers would
starve the page's handlers. The thread hands every event to the loop as it comes; nothing is buffered beyond
that queue, so text is neither lost nor repeated.

Cancelling (the client went away) sets the answer's token: the engine stops at the next token, and the thread
closes the work generator, which ends the lease and frees the slot at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass

from app.api.responses import Extension
from app.services.answering.documents_turn import FinalAnswer
from backends.base import CancelToken, ChatEvent, ToolCall

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Started:
    """The model is held, the prompt fits, and the answer is about to be written."""

    model: str
    extension: Extension


@dataclass(frozen=True)
class Checked:
    """An answer from documents as it is kept, after the stream: named if it only pointed at a passage, each
    citation on a passage that holds its claim. Sent as the reply's message, or, when streamed, in the last chunk."""

    answer: FinalAnswer


@dataclass(frozen=True)
class Called:
    """A tool call the answer made, read out of its text (``backends.tool_calls``): sent to the client to run."""

    call: ToolCall
    index: int  # its place among this answer's calls
    streamed: bool = False  # a stream has had it already, as :class:`CallOpened` and :class:`CallPiece`


@dataclass(frozen=True)
class CallOpened:
    """A call being written: its id and function, and its arguments so far (streamed replies send it at once)."""

    index: int
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class CallPiece:
    """The next piece of the arguments of the call at ``index``, as the model wrote it."""

    index: int
    text: str


@dataclass(frozen=True)
class Failed:
    error: BaseException


Step = Started | ChatEvent | Checked | Called | CallOpened | CallPiece
JobEvent = Step | Failed
Work = Callable[[CancelToken], Generator[Step, None, None]]


class AnswerJob:
    def __init__(self, work: Work, loop: asyncio.AbstractEventLoop, name: str = "hearth-api-answer") -> None:
        self.cancel_token = CancelToken()
        self._work = work
        self._loop = loop
        self._queue: asyncio.Queue[JobEvent | None] = asyncio.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> AnswerJob:
        self._thread.start()
        return self

    def cancel(self) -> None:
        self.cancel_token.cancel()

    async def next(self) -> JobEvent | None:
        """The next event; None once the answer is over (after its last event or its failure)."""
        return await self._queue.get()

    def _run(self) -> None:
        steps: Generator[Step, None, None] | None = None
        try:
            steps = self._work(self.cancel_token)
            for step in steps:
                self._put(step)
                if self.cancel_token.cancelled:
                    break
        except Exception as exc:
            if not self.cancel_token.cancelled:
                self._put(Failed(exc))
        finally:
            try:
                if steps is not None:
                    steps.close()  # ends the engine's stream and the lease, even when we stopped early
            except Exception:
                log.exception("closing an answer failed")
            self._put(None)

    def _put(self, item: JobEvent | None) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:
            self.cancel_token.cancel()  # the loop is gone (server stopping): nobody is reading
