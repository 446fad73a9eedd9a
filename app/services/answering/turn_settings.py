"""How a turn is answered, as every front end asks for it: plain data, importable without the chat service (the
command line's parser and the benchmarks name it without loading the store, the retriever and the tools)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from backends.base import GenerationParams

if TYPE_CHECKING:
    from app.services.answering.tool_turn import ToolUse


@dataclass(frozen=True)
class TurnSettings:
    """How a turn is answered, as every front end asks for it (the page, `hearth chat` and `hearth ask`, the
    evaluations and benchmarks): how to write (sampling, length, the adapter), the system prompt, the collection the
    answer comes from, and the tools the model may call with how each call is asked about."""

    params: GenerationParams
    system_prompt: str = ""
    collection: str | None = None
    tools: ToolUse | None = None
    # the passages' caches kept and joined when a later question holds them (llama.cpp only: the
    # service's own ``keep_share`` does it on the page; `hearth eval answers --keep-passages` measures it)
    keep_passages: bool = False
