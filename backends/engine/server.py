"""The engine process's side: load one model, then answer requests until told to stop or until the web
process goes away. Each streamed answer runs in a thread of its own, so a backend with several slots answers
them together; counts of plain text are answered at once, between them. Counts of chat messages render the
model's chat template, so they get a thread of their own too: the loop that hears Stop never waits on a template.
When the model's notes change while it serves (a chat template refused at a later turn), the web process is
told before the reply that changed them."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from backends.base import Backend, CancelToken, ChatEvent, GenerationParams
from backends.engine.protocol import (
    CancelRequest,
    ChatRequest,
    CompletionRequest,
    CountRequest,
    ErrorInfo,
    Failed,
    ForgetRequest,
    LoadFailed,
    LogLine,
    NotesChanged,
    Ready,
    Reply,
    Shutdown,
    Start,
    ThreadsRequest,
)
from models.shared.errors import AdapterError, GenerationError, HearthError, InvalidChoice

log = logging.getLogger("hearth.engine")


class _Outbox:
    """One writer at a time on the connection; a web process that went away ends the engine."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def send(self, message: object) -> None:
        try:
            with self._lock:
                self._conn.send(message)
        except (BrokenPipeError, ConnectionResetError, OSError):
            os._exit(0)


class _ForwardLogs(logging.Handler):
    """The engine's log records go to the web process, whose logging configuration decides what is shown."""

    def __init__(self, out: _Outbox) -> None:
        super().__init__()
        self._out = out

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._out.send(LogLine(record.name, record.levelno, record.getMessage()))
        except Exception:  # never let logging break an answer
            self.handleError(record)


class EngineServer:
    def __init__(self, conn: Connection, backend: Backend) -> None:
        self._conn = conn
        self._out = _Outbox(conn)
        self.outbox = self._out
        self._backend = backend
        self._cancels: dict[int, CancelToken] = {}
        self._lock = threading.Lock()
        self._notes: tuple[str, ...] = ()

    def load(self, start: Start) -> bool:
        try:
            for progress in self._backend.load(start.model, start.options):
                self._out.send(progress)
        except HearthError as exc:
            self._out.send(LoadFailed(ErrorInfo.of(exc)))
            return False
        with self._lock:
            self._notes = self._backend.notes
        self._out.send(Ready(self._backend.context_length, self._backend.slots, self._notes))
        return True

    def serve(self) -> None:
        while True:
            try:
                request = self._conn.recv()
            except (EOFError, OSError):
                return  # the web process is gone
            if isinstance(request, Shutdown):
                return
            if isinstance(request, CancelRequest):
                with self._lock:
                    token = self._cancels.get(request.id)
                if token is not None:
                    token.cancel()
            elif isinstance(request, ThreadsRequest):
                self._backend.set_threads(request.threads)
            elif isinstance(request, ForgetRequest):
                self._backend.forget_owner(request.owner)
            elif isinstance(request, CountRequest) and request.messages is None:
                self._count(request)
            elif isinstance(request, CountRequest):
                threading.Thread(
                    target=self._count, args=(request,), name=f"engine-count-{request.id}", daemon=True
                ).start()
            elif isinstance(request, ChatRequest | CompletionRequest):
                token = CancelToken()
                with self._lock:
                    self._cancels[request.id] = token
                threading.Thread(
                    target=self._stream, args=(request, token), name=f"engine-answer-{request.id}", daemon=True
                ).start()

    def _count(self, request: CountRequest) -> None:
        try:
            if request.messages is not None:
                value = self._backend.count_chat_tokens(request.messages)
            else:
                value = self._backend.count_tokens(request.text or "")
        except HearthError as exc:
            self._announce_notes()
            self._out.send(Failed(request.id, ErrorInfo.of(exc)))
            return
        except Exception as exc:  # a bug or a library error (a RecursionError on hostile input): answer, go on
            log.exception("count %d failed", request.id)
            self._out.send(Failed(request.id, ErrorInfo.of(_failed("count the prompt's tokens", exc))))
            return
        self._announce_notes()
        self._out.send(Reply(request.id, value))

    def _refusal(self, params: GenerationParams) -> HearthError | None:
        """Why this backend cannot answer with ``params`` (an adapter or a grammar it cannot apply), if it cannot."""
        label, capabilities = self._backend.label, self._backend.capabilities
        switch = "Choose the llama.cpp backend in the Hardware tab (or hearth use --backend llamacpp), or"
        if params.adapter is not None and not capabilities.lora_hot_swap:
            return AdapterError(
                f"The {label} backend cannot answer with a LoRA adapter.", f"{switch} detach the adapter."
            )
        if params.grammar is not None and not capabilities.grammar:
            return InvalidChoice(
                f"The {label} backend cannot hold an answer to a JSON schema or to tools' parameters.",
                f"{switch} leave out response_format and tools.",
            )
        return None

    def _stream(self, request: ChatRequest | CompletionRequest, cancel: CancelToken) -> None:
        events: Iterator[ChatEvent]
        refusal = self._refusal(request.params)
        if refusal is not None:
            self._out.send(Failed(request.id, ErrorInfo.of(refusal)))
            return
        try:
            if isinstance(request, ChatRequest):
                events = self._backend.stream_chat(request.messages, request.params, cancel)
            else:
                events = self._backend.stream_completion(request.prompt, request.params, cancel)
            for event in events:
                self._announce_notes()
                self._out.send(Reply(request.id, event))
        except HearthError as exc:
            self._announce_notes()
            self._out.send(Failed(request.id, ErrorInfo.of(exc)))
        except Exception as exc:  # a bug or a library error: end this answer, keep serving the others
            log.exception("answer %d failed", request.id)
            self._out.send(Failed(request.id, ErrorInfo.of(_failed("answer", exc))))
        finally:
            with self._lock:
                self._cancels.pop(request.id, None)

    def _announce_notes(self) -> None:
        """Tell the web process when the model's notes changed since they were last sent."""
        notes = self._backend.notes
        with self._lock:  # held while sending, so no reply overtakes the news of a change it came after
            if notes != self._notes:
                self._notes = notes
                self._out.send(NotesChanged(notes))

    def close(self) -> None:
        with self._lock:
            for token in self._cancels.values():
                token.cancel()
        self._backend.close()


def _failed(work: str, exc: Exception) -> GenerationError:
    said = str(exc)
    said = said if len(said) <= 200 else f"{said[:200]}…"  # a library's message may quote a whole input back
    return GenerationError(
        f"The engine failed to {work} ({type(exc).__name__}: {said}).",
        "Send the message again; if it keeps failing, try another model or backend.",
    )


def run(fd: int) -> int:
    # Ctrl+C in the terminal reaches the whole process group; the web process decides when the engine stops.
    # No PR_SET_PDEATHSIG: it fires when the *thread* that started this process ends (the runtime restarts
    # engines from short-lived threads). A web process that dies closes the connection, which ends serve().
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    try:
        start: Any = conn.recv()
    except (EOFError, OSError):
        return 0
    if not isinstance(start, Start):
        return 2
    from backends.hardware import block_telemetry_modules
    from backends.registry import ALL

    block_telemetry_modules()
    server = EngineServer(conn, ALL[start.backend]())
    root = logging.getLogger()
    root.setLevel(start.log_level)
    root.addHandler(_ForwardLogs(server.outbox))
    try:
        if server.load(start):
            server.serve()
    finally:
        server.close()
    return 0
