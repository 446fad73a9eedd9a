"""Render a model's chat template safely.

The template comes from the GGUF file, which is untrusted: a template can try to reach Python internals
(the CVE-2024-34359 class of payloads). Templates therefore render only in Jinja's immutable sandbox, which
refuses attribute access to internals. A template that fails to render, for any reason, is replaced by the
ChatML format and the caller is told why, so a hostile or broken file still chats and runs nothing.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backends.base import ChatMessage

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MAX_RENDERED_CHARS = 8_000_000


class TemplateRejected(Exception):
    """Internal: the template failed the probe render. Never crosses the backend boundary."""


@dataclass(frozen=True)
class ChatFormatter:
    template: str
    bos_token: str
    eos_token: str
    fallback_reason: str | None = None

    def render(self, messages: Sequence[ChatMessage], add_generation_prompt: bool = True) -> str:
        return _render(self.template, messages, self.bos_token, self.eos_token, add_generation_prompt)


def build_formatter(template: str | None, bos_token: str, eos_token: str) -> ChatFormatter:
    """A formatter for the model's template, or ChatML with the reason when that template cannot be used."""
    if not template:
        return ChatFormatter(CHATML_TEMPLATE, bos_token, eos_token, "the model has no chat template")
    probe = [
        ChatMessage("system", "You are helpful."),
        ChatMessage("user", "Hi"),
        ChatMessage("assistant", "Hello"),
        ChatMessage("user", "Bye"),
    ]
    try:
        _render(template, probe, bos_token, eos_token, True)
    except TemplateRejected as exc:
        return ChatFormatter(CHATML_TEMPLATE, bos_token, eos_token, f"its chat template was refused: {exc}")
    return ChatFormatter(template, bos_token, eos_token)


def _raise_exception(message: str) -> None:
    raise TemplateRejected(f"the template raised: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


def _render(
    template: str,
    messages: Sequence[ChatMessage],
    bos_token: str,
    eos_token: str,
    add_generation_prompt: bool,
) -> str:
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    context: dict[str, Any] = {
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "bos_token": bos_token,
        "eos_token": eos_token,
        "add_generation_prompt": add_generation_prompt,
    }
    try:
        rendered = env.from_string(template).render(**context)
    except TemplateRejected:
        raise
    except (
        TemplateError,
        TypeError,
        ValueError,
        AttributeError,
        KeyError,
        IndexError,
        RecursionError,
    ) as exc:
        # SecurityError is a TemplateError: the sandbox refused an unsafe operation.
        raise TemplateRejected(f"{type(exc).__name__}: {exc}") from exc
    if len(rendered) > MAX_RENDERED_CHARS:
        raise TemplateRejected("it rendered an absurdly long prompt")
    return rendered
