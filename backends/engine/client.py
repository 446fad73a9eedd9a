"""The web process's handle on one engine process: start it, stream answers from it, stop it, and learn at once
when it dies.

One reader thread receives everything the engine sends and routes it by request id to the caller waiting for
it, so any number of threads can stream at the same time. When the engine dies, every waiting caller gets
:class:`EngineStopped` and ``on_exit`` is told how it ended (a signal, an exit code).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection

from backends.base import CancelToken, ChatEvent, ChatMessage, Finished, GenerationParams, LoadOptions, LoadProgress
from backends.child_env import child_environment
from backends.engine.protocol import (
    CancelRequest,
    ChatRequest,
    CompletionRequest,
    CountRequest,
    Failed,
    ForgetRequest,
    LoadFailed,
    LogLine,
    NotesChanged,
    Ready,
    Reply,
    Request,
    Shutdown,
    Start,
    ThreadsRequest,
)
from backends.workers.link import HELD_UP_LOG, stopped_workers
from models.gguf import ModelInfo
from models.shared.errors import EngineStopped, HearthError, ModelLoadError, WorkersStopped

_WORKERS_PAGE_REMEDY = "Start Hearth's worker on that computer again, or remove it under Workers (Hardware tab)."

log = logging.getLogger(__name__)

# How often a waiting caller looks at its cancel token, so Stop reaches the engine even before the next token.
CANCEL_POLL_S = 0.05
SHUTDOWN_GRACE_S = 5.0


@dataclass(frozen=True)
class EngineExit:
    """How an engine process ended, in words a person can read."""

    pid: int
    returncode: int | None
    expected: bool  # True when Hearth asked it to stop
    stopped_workers: tuple[str, ...] = ()  # workers holding layers that no longer answer (llama.cpp aborts then)
    held_up_workers: tuple[str, ...] = ()  # workers whose llama.cpp server another connection held (see Relay)

    @property
    def description(self) -> str:
        if self.stopped_workers:
            return f"worker {', '.join(self.stopped_workers)} stopped"
        if self.held_up_workers:
            return f"worker {', '.join(self.held_up_workers)} did not answer: its server was held by another connection"
        code = self.returncode
        if code is None:
            return "it stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            hints = {"SIGKILL": " — killed, perhaps by the out-of-memory killer", "SIGABRT": " — llama.cpp aborted"}
            return f"{name}{hints.get(name, '')}"
        return f"exit code {code}"


@dataclass(frozen=True)
class _Died:
    exit: EngineExit


class EngineProcess:
    """One model in one child process. Safe to use from many threads once :meth:`start` has finished."""

    def __init__(
        self,
        backend: str,
        model: ModelInfo,
        options: LoadOptions,
        on_exit: Callable[[EngineExit], None] | None = None,
    ) -> None:
        self.backend = backend
        self.model = model
        self.options = options
        self._on_exit = on_exit
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, queue.SimpleQueue[object]] = {}
        self._waiting_lock = threading.Lock()
        self._startup: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._exit: EngineExit | None = None
        self._held_up: list[str] = []  # workers the engine's relays gave up on (its log says so)
        self._stopping = False
        self.context_length = 0
        self.slots = 1
        self.notes: tuple[str, ...] = ()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._exit is None

    # --- lifetime -------------------------------------------------------------------------------------------
    def start(self) -> Iterator[LoadProgress]:
        """Start the process and load the model, yielding its progress. Raises the engine's own typed error if
        the load fails, or :class:`EngineStopped` if the process dies while loading."""
        ours, theirs = socket.socketpair()
        env = child_environment()
        # When llama.cpp aborts (a worker gone, for one) it runs gdb on itself where gdb is installed: seconds of
        # delay and a page of stack frames in the user's terminal for a failure Hearth names and recovers from.
        env.setdefault("GGML_NO_BACKTRACE", "1")
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "backends.engine", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env=env,
            )
        except OSError as exc:
            raise ModelLoadError(
                f"Could not start the engine process: {exc}.", "Check that Hearth's Python is still installed."
            ) from exc
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        threading.Thread(target=self._read, name=f"engine-reader-{self._process.pid}", daemon=True).start()
        level = min(logging.getLogger().getEffectiveLevel(), logging.getLogger("llama.cpp").getEffectiveLevel())
        self._send(Start(self.backend, self.model, self.options, level))
        log.info("engine process %d started for %s", self._process.pid, self.model.path.name)
        while True:
            message = self._startup.get()
            if isinstance(message, LoadProgress):
                yield message
            elif isinstance(message, Ready):
                self.context_length, self.slots, self.notes = message.context_length, message.slots, message.notes
                return
            elif isinstance(message, LoadFailed):
                self.close()
                raise message.error.to_exception()
            elif isinstance(message, _Died):
                if message.exit.stopped_workers:
                    raise WorkersStopped(
                        f"Worker {', '.join(message.exit.stopped_workers)} stopped while {self.model.path.name} "
                        "was loading.",
                        "Start it again (`hearth worker`) or remove it (`hearth workers remove ADDRESS`).",
                        message.exit.stopped_workers,
                        page_remedy=_WORKERS_PAGE_REMEDY,
                    )
                if message.exit.held_up_workers:
                    held = ", ".join(message.exit.held_up_workers)
                    raise WorkersStopped(
                        f"Worker {held} did not answer while {self.model.path.name} was loading: its llama.cpp "
                        "server is held by another connection.",
                        f"Restart that worker (`hearth worker`), or remove it (`hearth workers remove {held}`).",
                        message.exit.held_up_workers,
                        page_remedy=_WORKERS_PAGE_REMEDY,
                        held_up=True,
                    )
                raise EngineStopped(
                    f"The engine stopped while loading {self.model.path.name} ({message.exit.description}).",
                    "The model may be damaged or need more memory than is free; try another model or a smaller "
                    "context.",
                )

    def close(self) -> None:
        """Ask the engine to stop; kill it if it does not within a few seconds. Safe to call more than once."""
        process = self._process
        if process is None:
            return
        self._stopping = True
        if self._exit is None:
            with contextlib.suppress(HearthError):
                self._send(Shutdown())
            try:
                process.wait(SHUTDOWN_GRACE_S)
            except subprocess.TimeoutExpired:
                log.warning("engine process %d did not stop; killing it", process.pid)
                process.kill()
                process.wait()
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()

    def abort(self) -> None:
        """Kill the engine now, without asking: for a load that is stuck (it would not hear a shutdown)."""
        process = self._process
        if process is None:
            return
        self._stopping = True
        if self._exit is None:
            log.warning("killing engine process %d (its load was stopped)", process.pid)
            process.kill()
            process.wait()
        self.close()

    # --- requests -------------------------------------------------------------------------------------------
    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        return self._stream(lambda id_: ChatRequest(id_, tuple(messages), params), cancel)

    def stream_completion(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]:
        return self._stream(lambda id_: CompletionRequest(id_, prompt, params), cancel)

    def count_tokens(self, text: str) -> int:
        return self._call(lambda id_: CountRequest(id_, text=text))

    def set_threads(self, threads: int | None) -> None:
        self._send_quietly(ThreadsRequest(threads))

    def forget_owner(self, owner: str) -> None:
        self._send_quietly(ForgetRequest(owner))

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self._call(lambda id_: CountRequest(id_, messages=tuple(messages)))

    def _stream(self, make: Callable[[int], Request], cancel: CancelToken) -> Iterator[ChatEvent]:
        request_id, inbox = self._open()
        finished = False
        cancel_sent = False
        try:
            self._send(make(request_id))
            while True:
                try:
                    message = inbox.get(timeout=CANCEL_POLL_S)
                except queue.Empty:
                    message = None
                if cancel.cancelled and not cancel_sent:
                    cancel_sent = True
                    self._send_quietly(CancelRequest(request_id))
                if message is None:
                    continue
                event = self._unwrap(message)
                assert not isinstance(event, int)
                yield event
                if isinstance(event, Finished):
                    finished = True
                    return
        finally:
            if not finished and not cancel_sent:
                # The caller stopped listening (a closed browser tab, a dropped API client): free the slot.
                self._send_quietly(CancelRequest(request_id))
            self._close_inbox(request_id)

    def _call(self, make: Callable[[int], Request]) -> int:
        request_id, inbox = self._open()
        try:
            self._send(make(request_id))
            value = self._unwrap(inbox.get())
            assert isinstance(value, int)
            return value
        finally:
            self._close_inbox(request_id)

    def _unwrap(self, message: object) -> ChatEvent | int:
        if isinstance(message, Reply):
            return message.event
        if isinstance(message, Failed):
            raise message.error.to_exception()
        assert isinstance(message, _Died)
        raise self._stopped_error(message.exit)

    def _stopped_error(self, exit_: EngineExit) -> EngineStopped:
        if exit_.expected:
            return EngineStopped("The model was closed.", "Send your message again.")
        if exit_.stopped_workers:
            return WorkersStopped(
                f"Worker {', '.join(exit_.stopped_workers)} stopped; continuing without it.",
                "What was written so far is kept; send your message again in a moment.",
                exit_.stopped_workers,
            )
        return EngineStopped(
            f"The model stopped unexpectedly ({exit_.description}); it is restarting.",
            "What was written so far is kept; send your message again in a moment.",
        )

    def _open(self) -> tuple[int, queue.SimpleQueue[object]]:
        inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        request_id = next(self._ids)
        with self._waiting_lock:
            if self._exit is not None:
                raise self._stopped_error(self._exit)
            self._waiting[request_id] = inbox
        return request_id, inbox

    def _close_inbox(self, request_id: int) -> None:
        with self._waiting_lock:
            self._waiting.pop(request_id, None)

    def _send(self, message: object) -> None:
        if self._conn is None:
            raise EngineStopped("The engine has not started.", "Load a model first.")
        try:
            with self._send_lock:
                self._conn.send(message)
        except OSError as exc:
            raise self._stopped_error(self._exit or EngineExit(self.pid or 0, None, self._stopping)) from exc

    def _send_quietly(self, message: object) -> None:
        with contextlib.suppress(HearthError):
            self._send(message)

    # --- the reader thread ----------------------------------------------------------------------------------
    def _read(self) -> None:
        assert self._conn is not None and self._process is not None
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                break
            if isinstance(message, Reply | Failed):
                with self._waiting_lock:
                    inbox = self._waiting.get(message.id)
                if inbox is not None:  # else: an answer whose caller already left
                    inbox.put(message)
            elif isinstance(message, LogLine):
                if message.name == HELD_UP_LOG:
                    self._held_up.append(message.message)
                    continue
                logging.getLogger(message.name).log(message.level, "%s", message.message)
            elif isinstance(message, NotesChanged):
                self.notes = message.notes
            else:
                self._startup.put(message)
        self._finish()

    def _finish(self) -> None:
        assert self._process is not None
        try:
            returncode: int | None = self._process.wait(SHUTDOWN_GRACE_S)
        except subprocess.TimeoutExpired:
            # The connection broke but the process lives on (it closed its end): it is of no use any more.
            self._process.kill()
            returncode = self._process.wait()
        # llama.cpp aborts when a worker holding layers goes away: say which one, so the restart can leave it out.
        lost = (
            stopped_workers(self.options.workers, self.options.worker_links)
            if self.options.workers and not self._stopping
            else ()
        )
        held = tuple(dict.fromkeys(w for w in self._held_up if w not in lost))
        died = _Died(EngineExit(self._process.pid, returncode, self._stopping, lost, held))
        with self._waiting_lock:
            self._exit = died.exit
        if died.exit.expected:
            log.info("engine process %d stopped", died.exit.pid)
        else:
            log.error("engine process %d died: %s", died.exit.pid, died.exit.description)
        # The supervisor hears first, so whoever learns of the death from their answer already finds Hearth
        # restarting the engine.
        if self._on_exit is not None:
            self._on_exit(died.exit)
        with self._waiting_lock:
            waiting = list(self._waiting.values())
        for inbox in waiting:
            inbox.put(died)
        self._startup.put(died)
