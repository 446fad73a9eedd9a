"""The follow-up that names an answer which only pointed at a passage (see ``rag/naming.py`` for the rule).

One short extra generation, only for such answers: the conversation so far, the answer as written, and
:data:`rag.naming.FOLLOW_UP`, greedy and at most :data:`NAME_TOKENS` tokens. The prompt's prefix is the answer's
own, so llama.cpp reuses its cache and the follow-up costs about a second on a laptop CPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from app.services.serving.model_handles import Lease
from backends.base import CancelToken, ChatMessage, GenerationParams, TextDelta
from rag.naming import FOLLOW_UP, Named, fill_name, pointed_at
from rag.prompt import Source

NAME_TOKENS = 24


def name_pointed_answer(
    engine: Lease,
    messages: Sequence[ChatMessage],
    answer: str,
    question: str,
    sources: Sequence[Source],
    params: GenerationParams,
    cancel: CancelToken,
) -> Named | None:
    """The answer with its name filled in, when it pointed at a passage instead of naming the answer and the
    follow-up gave a name that passage holds; None otherwise (nothing is asked for an answer that says something)."""
    number = pointed_at(answer, question, sources)
    if number is None:
        return None
    follow_up = [*messages, ChatMessage("assistant", answer), ChatMessage("user", FOLLOW_UP)]
    short = dataclasses.replace(params, temperature=0.0, max_new_tokens=NAME_TOKENS)
    reply = "".join(e.text for e in engine.stream_chat(follow_up, short, cancel) if isinstance(e, TextDelta))
    if cancel.cancelled:
        return None
    return fill_name(answer, number, reply, question, sources)
