"""The engine's side of the chat-template renderer process (``backends.template_worker``).

One renderer serves one model's template. Requests go one at a time; each has a wall-clock budget that starts
when the request is sent. A request that runs past it is answered with a failure, and the process is killed
at once, so no caller ever waits on a template longer than one budget (plus the wait for a request before it,
which the same bound holds). A process found dead before a request is started again; one that dies during a
request counts as that request's failure (a crash, or the kernel's own limits).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from backends.base import ChatMessage, ToolSpec
from backends.template_worker import FRAME_HEADER, MAX_FRAME_BYTES, encode_frame
from backends.tool_calls import call_json, tool_json

# Starting Python and importing Jinja: not part of any render's budget, but a process that cannot even start in
# this long is given up on.
START_TIMEOUT_S = 30.0
_WORKER = Path(__file__).with_name("template_worker.py")

# How the renderer's own limits end it: SIGXCPU (its CPU seconds) and SIGALRM (its wall alarm).
_KERNEL_LIMIT_SIGNALS = (-signal.SIGXCPU, -signal.SIGALRM)

FailureKind = Literal["error", "timeout", "memory", "too_long", "crashed"]


@dataclass(frozen=True)
class Conversation:
    """One render: these messages, with or without the assistant's opening."""

    messages: tuple[ChatMessage, ...]
    add_generation_prompt: bool = True
    tools: tuple[ToolSpec, ...] = ()  # offered to a template that renders tools itself


class RenderFailed(Exception):
    """The template failed on ``conversations[index]`` (None: not known which), for the reason ``kind``."""

    def __init__(self, kind: FailureKind, detail: str = "", index: int | None = None) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.index = index


class RendererClosed(Exception):
    """The renderer was closed (the model is being closed, or its template was refused) before it answered."""


class _Overrun(Exception):
    pass


class _Ended(Exception):
    pass


class TemplateRenderer:
    """Renders one template in a limited child process. Thread-safe; ``close()`` may be called at any time."""

    def __init__(self, template: str, bos_token: str, eos_token: str, memory_bytes: int) -> None:
        self._setup = encode_frame({"template": template, "bos_token": bos_token, "eos_token": eos_token})
        self._command = [sys.executable, "-I", str(_WORKER), str(memory_bytes)]
        self._lock = threading.Lock()  # one request at a time on the pipes
        self._closed = False
        self._process: subprocess.Popen[bytes] | None = None
        self._ready = False
        with contextlib.suppress(RenderFailed):  # started early, so the handshake is quick; retried if it failed
            self._spawn()

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def render(self, conversations: Sequence[Conversation], max_chars: Sequence[int], budget_s: float) -> list[str]:
        """The prompts of ``conversations``, all rendered within ``budget_s`` seconds and each no longer than its
        ``max_chars``, or :class:`RenderFailed`."""
        request = encode_frame(
            {
                "budget_s": budget_s,
                "conversations": [
                    {
                        "messages": [[m.role, m.content, _extras(m)] for m in c.messages],
                        "add_generation_prompt": c.add_generation_prompt,
                        "tools": [tool_json(t) for t in c.tools] or None,
                        "max_chars": limit,
                    }
                    for c, limit in zip(conversations, max_chars, strict=True)
                ],
            }
        )
        with self._lock:
            process = self._live_process()
            deadline = time.monotonic() + budget_s
            current: int | None = 0 if len(conversations) == 1 else None
            try:
                _write(process, request, deadline)
                reply = _read_frame(process, deadline)
                while isinstance(reply, dict) and isinstance(reply.get("rendering"), int):
                    current = reply["rendering"]
                    reply = _read_frame(process, deadline)
            except _Overrun:
                self._kill(process)
                raise RenderFailed("timeout", f"{round(budget_s, 1):g} s", current) from None
            except _Ended:
                self._kill(process)
                if self._closed:
                    raise RendererClosed from None
                if process.returncode in _KERNEL_LIMIT_SIGNALS:  # the kernel's limits acted before this deadline
                    raise RenderFailed("timeout", f"{round(budget_s, 1):g} s", current) from None
                raise RenderFailed("crashed", _exit_description(process), current) from None
        return _prompts(reply, len(conversations))

    def close(self) -> None:
        """Kill the process; a render in progress ends at once with :class:`RendererClosed`. Safe to call again."""
        self._closed = True
        process = self._process
        if process is not None:
            # Only a signal here: the pipes belong to whoever holds the lock, and the kill ends their wait now.
            with contextlib.suppress(OSError):
                process.kill()
        with self._lock:
            if self._process is not None:
                self._kill(self._process)
                self._process = None

    # --- the process, under the lock ------------------------------------------------------------------------
    def _spawn(self) -> subprocess.Popen[bytes]:
        self._ready = False
        self._process = None
        try:
            # close_fds (the default) keeps the engine's own connection out of the child.
            process = subprocess.Popen(self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as exc:
            raise RenderFailed("crashed", f"the template renderer could not start ({exc})") from exc
        assert process.stdin is not None
        os.set_blocking(process.stdin.fileno(), False)
        self._process = process
        if self._closed:  # closed while this one started: close() may have looked before it existed
            self._kill(process)
            raise RendererClosed
        return process

    def _live_process(self) -> subprocess.Popen[bytes]:
        """The process, started again if it died since the last request, past its opening handshake."""
        if self._closed:
            raise RendererClosed
        process = self._process
        if process is None or process.poll() is not None:
            if process is not None:
                self._kill(process)
            process = self._spawn()
        if not self._ready:
            deadline = time.monotonic() + START_TIMEOUT_S
            try:
                _write(process, self._setup, deadline)
                if _read_frame(process, deadline) != {"ready": True}:
                    raise _Ended
            except (_Overrun, _Ended):
                self._kill(process)
                if self._closed:
                    raise RendererClosed from None
                raise RenderFailed("crashed", "the template renderer could not start") from None
            self._ready = True
        return process

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


def _prompts(reply: Any, expected: int) -> list[str]:
    if isinstance(reply, dict) and "failure" in reply:
        kind = reply.get("failure")
        index = reply.get("index")
        if kind in ("error", "memory", "too_long"):
            return _raise(kind, str(reply.get("detail", "")), index if isinstance(index, int) else None)
    prompts = reply.get("prompts") if isinstance(reply, dict) else None
    if not (isinstance(prompts, list) and len(prompts) == expected and all(isinstance(p, str) for p in prompts)):
        return _raise("crashed", "the template renderer answered something unexpected", None)
    return prompts


def _raise(kind: FailureKind, detail: str, index: int | None) -> list[str]:
    raise RenderFailed(kind, detail, index)


def _exit_description(process: subprocess.Popen[bytes]) -> str:
    code = process.returncode
    return f"it ended with signal {-code}" if code is not None and code < 0 else f"it ended with code {code}"


def _write(process: subprocess.Popen[bytes], data: bytes, deadline: float) -> None:
    assert process.stdin is not None
    fd = process.stdin.fileno()
    view = memoryview(data)
    while view:
        _wait(fd, select.POLLOUT, deadline)
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        except OSError as exc:  # the process is gone (a broken pipe)
            raise _Ended from exc
        view = view[written:]


def _read_frame(process: subprocess.Popen[bytes], deadline: float) -> Any:
    header = _read_exact(process, FRAME_HEADER.size, deadline)
    (length,) = FRAME_HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise _Ended
    try:
        return json.loads(_read_exact(process, length, deadline))
    except ValueError:
        raise _Ended from None


def _read_exact(process: subprocess.Popen[bytes], size: int, deadline: float) -> bytes:
    assert process.stdout is not None
    fd = process.stdout.fileno()
    data = bytearray()
    while len(data) < size:
        _wait(fd, select.POLLIN, deadline)
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise _Ended
        data += chunk
    return bytes(data)


def _wait(fd: int, event: int, deadline: float) -> None:
    poller = select.poll()
    poller.register(fd, event)
    while True:
        remaining_ms = (deadline - time.monotonic()) * 1000
        if remaining_ms <= 0:
            raise _Overrun
        if poller.poll(max(1, int(remaining_ms))):
            return


def _extras(message: ChatMessage) -> dict[str, Any]:
    """What a message carries besides its role and text, as templates read it."""
    extras: dict[str, Any] = {}
    if message.tool_calls:
        extras["tool_calls"] = [call_json(c) for c in message.tool_calls]
    if message.tool_call_id is not None:
        extras["tool_call_id"] = message.tool_call_id
    return extras
