"""Fit a conversation into the model's context window. Pure: the token counter is passed in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backends.base import ChatMessage
from models.shared.errors import ContextTooLong

TokenCounter = Callable[[Sequence[ChatMessage]], int]


@dataclass(frozen=True)
class FittedHistory:
    messages: tuple[ChatMessage, ...]
    dropped: int
    prompt_tokens: int


def answer_reserve(context_length: int, max_new_tokens: int) -> int:
    """Tokens kept free for the answer: what was asked for, but never more than a quarter of the window,
    so one long question still gets answered (the answer is then capped by what is left)."""
    return max(1, min(max_new_tokens, context_length // 4))


def prompt_budget(context_length: int, max_new_tokens: int) -> int:
    """Tokens the prompt may take: the window less the answer's reserve."""
    return context_length - answer_reserve(context_length, max_new_tokens)


def fit_history(messages: Sequence[ChatMessage], budget_tokens: int, count: TokenCounter) -> FittedHistory:
    """Drop the oldest turns until the rendered prompt fits ``budget_tokens``.

    The system prompt (if first) and the last message are always kept; turns are dropped whole, from a user
    message up to the next one, so the model never sees an answer without its question.
    """
    if not messages:
        raise ValueError("fit_history needs at least one message")
    system = tuple(messages[:1]) if messages[0].role == "system" else ()
    turns = list(messages[len(system) :])
    starts = [i for i, m in enumerate(turns) if m.role == "user"] or [0]
    if starts[0] != 0:
        starts.insert(0, 0)

    def attempt(cut: int) -> tuple[tuple[ChatMessage, ...], int]:
        kept = (*system, *turns[starts[cut] :])
        return kept, count(kept)

    full, tokens = attempt(0)
    if tokens <= budget_tokens:
        return FittedHistory(full, 0, tokens)
    # Token count only falls as more turns are dropped, so binary-search the smallest cut that fits.
    low, high = 1, len(starts) - 1
    best: tuple[tuple[ChatMessage, ...], int] | None = None
    while low <= high:
        middle = (low + high) // 2
        kept, tokens = attempt(middle)
        if tokens <= budget_tokens:
            best = (kept, tokens)
            high = middle - 1
        else:
            low = middle + 1
    if best is None:
        _, tokens = attempt(len(starts) - 1)
        raise ContextTooLong(
            f"This message needs {tokens} tokens with the system prompt, but only {budget_tokens} fit in the "
            "model's context window after room for the answer.",
            "Shorten the message (or the system prompt), or raise the context length with --context.",
            page_remedy="Shorten the message, or the System prompt under Answer settings.",
        )
    kept, tokens = best
    return FittedHistory(kept, len(messages) - len(kept), tokens)
