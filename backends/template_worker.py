"""The chat-template renderer process: ``python -I template_worker.py MEMORY_BYTES``.

A GGUF's chat template is untrusted code. Jinja's immutable sandbox stops it from reaching Python internals,
but not from looping for minutes, computing ``9**(9**9)`` or allocating gigabytes. So templates render here, in
a process of their own with hard limits the kernel enforces whatever the template does, even inside one long
C call: an address-space limit (a big allocation fails with MemoryError), a CPU-seconds limit and a wall alarm
re-armed for every request (the kernel kills the process when either runs out). The parent also keeps its own
deadline and kills this process when it passes.

Imports only jinja2 and the standard library (it runs with ``-I``: no project code, no user site). Talks over
stdin/stdout in frames of a 4-byte length and UTF-8 JSON, never pickle: the parent treats what this process
says as data. Ends when stdin closes, so it never outlives the engine that started it.

Protocol: the first frame is ``{"template", "bos_token", "eos_token"}``, answered by ``{"ready": true}``. Each
later frame is ``{"budget_s", "conversations": [{"messages": [[role, content, extras], ...],
"add_generation_prompt", "max_chars", "tools"}]}`` (extras: a message's ``tool_calls`` or ``tool_call_id``; tools:
OpenAI's function list, or null), answered by ``{"prompts": [...]}`` or, at the first conversation that fails,
``{"failure", "detail", "index"}`` where failure is ``error``, ``memory`` or ``too_long`` (a prompt over its
``max_chars`` is never sent back). When a request holds several conversations, ``{"rendering": index}`` goes out
as each one starts, so a parent that has to cut the request off knows which conversation hung.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import struct
import sys
from collections.abc import Callable
from typing import IO, Any

FRAME_HEADER = struct.Struct(">I")
# A frame longer than this is refused by whichever side reads it.
MAX_FRAME_BYTES = 256 * 1024 * 1024
# The kernel's limits sit this far past the request's budget: the parent's deadline normally acts first.
KERNEL_GRACE_S = 1.0


class TemplateRaised(Exception):
    """The template called ``raise_exception``."""


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame's JSON value, or None when the stream has ended."""
    header = stream.read(FRAME_HEADER.size)
    if len(header) < FRAME_HEADER.size:
        return None
    (length,) = FRAME_HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        return None
    body = stream.read(length)
    return json.loads(body) if len(body) == length else None


def encode_frame(value: Any) -> bytes:
    body = json.dumps(value, ensure_ascii=False).encode("utf-8")
    return FRAME_HEADER.pack(len(body)) + body


def main(argv: list[str]) -> int:
    memory_bytes = int(argv[1])
    # Ctrl+C in the terminal reaches the whole process group; the parent decides when this process ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The protocol owns the real stdout; anything else that writes to fd 1 lands in stderr instead.
    outbox = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inbox = sys.stdin.buffer
    _limit_process(memory_bytes)
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    setup = read_frame(inbox)
    if not isinstance(setup, dict):
        return 2
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    renderer = _Renderer(env, str(setup["template"]), str(setup["bos_token"]), str(setup["eos_token"]))
    _send(outbox, {"ready": True})
    while (request := read_frame(inbox)) is not None:
        _arm(float(request["budget_s"]))
        reply = renderer.render_all(request["conversations"], lambda index: _send(outbox, {"rendering": index}))
        _disarm()
        _send(outbox, reply)
    return 0


class _Renderer:
    def __init__(self, env: Any, template: str, bos_token: str, eos_token: str) -> None:
        self._env = env
        self._source = template
        self._compiled: Any = None
        self._bos_token = bos_token
        self._eos_token = eos_token

    def render_all(self, conversations: list[dict[str, Any]], starting: Callable[[int], None]) -> dict[str, Any]:
        prompts: list[str] = []
        for index, conversation in enumerate(conversations):
            if len(conversations) > 1:
                starting(index)
            try:
                # Compiling can run template code too (Jinja folds constant expressions), so it happens here,
                # under the first request's limits.
                if self._compiled is None:
                    self._compiled = self._env.from_string(self._source)
                variables: dict[str, Any] = {}
                if conversation.get("tools"):
                    variables["tools"] = conversation["tools"]
                prompt = self._compiled.render(
                    messages=[_message(*fields) for fields in conversation["messages"]],
                    bos_token=self._bos_token,
                    eos_token=self._eos_token,
                    add_generation_prompt=bool(conversation["add_generation_prompt"]),
                    # Qwen3's switch: answer without a thinking phase first (backends.thinking says why)
                    enable_thinking=False,
                    **variables,
                )
            except MemoryError:
                return {"failure": "memory", "detail": "", "index": index}
            except TemplateRaised as exc:
                return {"failure": "error", "detail": f"the template raised: {exc}", "index": index}
            except Exception as exc:  # any failure at all refuses the template; the parent says why
                return {"failure": "error", "detail": f"{type(exc).__name__}: {exc}"[:500], "index": index}
            if len(prompt) > int(conversation["max_chars"]):
                return {"failure": "too_long", "detail": str(len(prompt)), "index": index}
            prompts.append(prompt)
        return {"prompts": prompts}


def _message(role: str, content: str, extras: dict[str, Any] | None = None) -> dict[str, Any]:
    """A message as templates read it: role and content, and a tool call's or a tool result's fields."""
    return {"role": role, "content": content, **(extras or {})}


def _limit_process(memory_bytes: int) -> None:
    import resource

    limits = (
        (resource.RLIMIT_AS, memory_bytes),
        (resource.RLIMIT_CORE, 0),  # a killed renderer leaves no core file behind
        (resource.RLIMIT_FSIZE, 0),  # nor any other file
    )
    for which, value in limits:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):  # a limit this system does not enforce; the parent's deadline still holds
            print(f"template renderer: resource limit {which} not available", file=sys.stderr)


def _arm(budget_s: float) -> None:
    """Let the kernel end this process if the request runs past its budget (plus grace), in CPU or wall time."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    used_s = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(used_s + budget_s + KERNEL_GRACE_S) + 1
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    # SIGALRM's default action ends the process; nothing here installs a handler for it.
    signal.setitimer(signal.ITIMER_REAL, budget_s + KERNEL_GRACE_S)


def _disarm() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)


def _send(outbox: IO[bytes], value: Any) -> None:
    outbox.write(encode_frame(value))
    outbox.flush()


def _raise_exception(message: str) -> None:
    raise TemplateRaised(message)


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
