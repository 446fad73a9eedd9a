"""``hearth chat`` with no question: a conversation in the terminal. Each line typed is a
question in one conversation, answered with the earlier turns as the page answers them, and saved like the page's
(it is listed there). Ctrl+C stops the answer being written (what was written is kept); Ctrl+C at the prompt, or
Ctrl+D, leaves. The line editor (arrows, history of this session) is Python's readline where it exists."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
from collections.abc import Iterator
from types import FrameType

from app.cli.commands import load_model, print_answer
from app.services.answering.turn_settings import TurnSettings
from app.services.container import build_services
from app.settings import Settings
from app.terminal_text import for_terminal
from backends.base import CancelToken
from models.shared.errors import HearthError

EXIT_OK = 0
PROMPT = "you> "
WELCOME = (
    "Chatting with {model}. Type a question and press Enter; Ctrl+C stops an answer, Ctrl+D leaves. "
    "The conversation is saved: the page lists it."
)


def run_chat_session(settings: Settings) -> int:
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and this session's history for input())
    services = build_services(settings)
    try:
        params = dataclasses.replace(services.generation_params(), report_reading=True)  # a long prompt's progress
        load_model(services)
        _err(WELCOME.format(model=for_terminal(services.runtime.status.model_name)))
        conversation_id: str | None = None
        for question in _questions():
            cancel = CancelToken()
            events = services.chat.send(
                conversation_id, question, TurnSettings(params, settings.generation.system_prompt), cancel=cancel
            )
            try:
                with _stop_on_ctrl_c(cancel):
                    conversation_id = _show(events) or conversation_id
            except HearthError as exc:  # this question could not be answered; the conversation goes on
                _err(f"error: {for_terminal(exc.message)}\n  what to do: {for_terminal(exc.remedy)}")
    finally:
        services.close()
    return EXIT_OK


def _questions() -> Iterator[str]:
    """Each question typed, until Ctrl+D or Ctrl+C at the prompt."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where SIGINT was ignored when Hearth started
    while True:
        try:
            line = input(PROMPT)
        except (EOFError, KeyboardInterrupt):
            sys.stdout.write("\n")
            return
        if line.strip():
            yield line


class _stop_on_ctrl_c:
    """While an answer is written, Ctrl+C stops it (the engine ends it at the next token) instead of leaving."""

    def __init__(self, cancel: CancelToken) -> None:
        self._cancel = cancel

    def __enter__(self) -> None:
        def stop(_signum: int, _frame: FrameType | None) -> None:
            self._cancel.cancel()

        signal.signal(signal.SIGINT, stop)

    def __exit__(self, *_exc: object) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _show(events: Iterator[object]) -> str | None:
    """Print one answer as it streams, then whether it was stopped or how fast it came; the conversation's id."""
    answer = print_answer(events)
    if answer.finished == "cancelled":
        _err("[stopped: what was written is kept]")
    elif answer.usage is not None:
        _err(f"[{answer.usage.completion_tokens} tokens · {answer.usage.decode_tokens_per_s:.1f} tokens/s]")
    return answer.conversation_id


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
