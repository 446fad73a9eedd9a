"""A chat message and a tool call as every layer passes them: the engines read and write them, the model files'
tuning data is rendered from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant turn that called tools
    tool_call_id: str | None = None  # a tool turn: the call whose result it is


@dataclass(frozen=True)
class ToolCall:
    """One call the model made: the function's name and its arguments as JSON text (as OpenAI carries them)."""

    id: str
    name: str
    arguments: str
