"""The same question answered twice, without and with a LoRA adapter, for the Tuning tab's side-by-side view.

Both answers use the same sampling settings and the same seed, so the adapter is the only difference. They are
written one after the other: one llama.cpp context applies one adapter at a time (answers in progress with another
adapter would wait anyway), and the first answer then warms the prompt's cache for the second."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from app.services.serving.runtime import ModelRuntime
from backends.base import AdapterUse, CancelToken, ChatMessage, GenerationParams, TextDelta

COMPARE_SEED = 7
COMPARE_MAX_TOKENS = 200


@dataclass(frozen=True)
class SideBySide:
    without: str
    with_adapter: str
    writing: str  # "without", "with", or "" once both are written


def compare_answers(
    runtime: ModelRuntime,
    question: str,
    system_prompt: str,
    params: GenerationParams,
    adapter: AdapterUse,
    cancel: CancelToken | None = None,
) -> Iterator[SideBySide]:
    """The two answers as they grow: first without the adapter, then with it."""
    cancel = cancel or CancelToken()
    base = dataclasses.replace(
        params, adapter=None, seed=COMPARE_SEED, max_new_tokens=min(params.max_new_tokens, COMPARE_MAX_TOKENS)
    )
    messages = (
        [ChatMessage("system", system_prompt), ChatMessage("user", question)]
        if system_prompt
        else [ChatMessage("user", question)]
    )
    without, tuned = "", ""
    with runtime.lease() as engine:
        for event in engine.stream_chat(messages, base, cancel):
            if isinstance(event, TextDelta):
                without += event.text
                yield SideBySide(without, tuned, "without")
        if cancel.cancelled:
            return
        for event in engine.stream_chat(messages, dataclasses.replace(base, adapter=adapter), cancel):
            if isinstance(event, TextDelta):
                tuned += event.text
                yield SideBySide(without, tuned, "with")
    yield SideBySide(without, tuned, "")
