"""Perplexity of encoded examples measured through llama.cpp, on the quantized model chat really uses, with or
without an adapter: the check an adapter passes before it is offered (trained in full precision, it must still
help the quantized model)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from models.tuning.encode import IGNORE, Encoded

# The check reads examples up to this many tokens (at least one example), twice: enough to tell a helpful adapter
# from a harmful one, in seconds (llama.cpp reads about 400 tokens/s of the embedded model here on 2 threads).
MAX_CHECK_TOKENS = 2048


def checked_items(items: Sequence[Encoded]) -> list[Encoded]:
    """The first examples, up to ``MAX_CHECK_TOKENS`` tokens in all (always at least one)."""
    chosen: list[Encoded] = []
    budget = MAX_CHECK_TOKENS
    for item in items:
        if chosen and len(item.input_ids) > budget:
            break
        chosen.append(item)
        budget -= len(item.input_ids)
    return chosen


def perplexity(model: Path, adapter: Path | None, items: Sequence[Encoded], threads: int) -> float:
    """exp(mean negative log-likelihood) of the labelled tokens of ``items``."""
    import numpy as np

    from backends.llamacpp.buffers import open_llama

    chosen = checked_items(items)
    longest = max(len(item.input_ids) for item in chosen)
    llm = open_llama(
        model_path=str(model),
        lora_path=str(adapter) if adapter else None,
        n_ctx=longest + 8,
        n_batch=512,
        logits_all=True,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    total, count = 0.0, 0
    try:
        for item in chosen:
            ids = list(item.input_ids)
            llm.reset()
            llm.eval(ids)
            logits = np.asarray(llm.scores[: len(ids)], dtype=np.float64)
            peak = logits.max(axis=1, keepdims=True)
            log_norm = peak[:, 0] + np.log(np.exp(logits - peak).sum(axis=1))
            for position in range(len(ids) - 1):
                target = item.labels[position + 1]
                if target != IGNORE:
                    total += float(log_norm[position] - logits[position, target])
                    count += 1
    finally:
        llm.close()
    return math.exp(total / count) if count else float("nan")
