"""The prompt of a conversation answered from documents, for the page and the API alike. Pure: the token counter is
passed in.

Each turn's prompt begins with the previous turn's prompt and answer, so the engine's cache of that conversation
holds everything but the new turn: a turn keeps the passages it was given where they were, a follow-up adds only
the passages no earlier turn shows (naming the others by number), and numbers run on across the conversation.

When the conversation outgrows the context window, the oldest turns are left out (whole, with their passages). Each
cut changes the start of the prompt, so the engine reads the rest again; to make that rare, a cut leaves room for
more turns (the prompt is brought down to :data:`REFIT_SHARE` of the budget) and the next turn keeps the same cut
for as long as it fits. Passages a left-out turn showed are shown again in full by the first kept turn that uses
them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backends.base import ChatMessage
from models.shared.errors import ContextTooLong
from rag.prompt import Source, rag_question

TokenCounter = Callable[[Sequence[ChatMessage]], int]

# After a cut, the prompt takes at most this share of its budget, leaving the rest for the turns to come.
REFIT_SHARE = 0.6


@dataclass(frozen=True)
class DocumentsTurn:
    question: str
    sources: tuple[Source, ...]  # the passages found for it, numbered for the whole conversation
    answer: str = ""  # what the model answered (the last turn, being asked, has none yet)
    from_documents: bool = True  # False: a plain chat turn earlier in the conversation, shown as it was asked


@dataclass(frozen=True)
class DocumentsPrompt:
    messages: tuple[ChatMessage, ...]
    first_turn: int  # the turns before this one were left out to fit
    prompt_tokens: int

    @property
    def dropped_messages(self) -> int:
        """Messages left out: each turn left out is a question and its answer."""
        return 2 * self.first_turn


def turn_messages(system_prompt: str, turns: Sequence[DocumentsTurn]) -> list[ChatMessage]:
    """The system prompt, then each turn's question with the passages it adds, and its answer (not the last's)."""
    messages = [ChatMessage("system", system_prompt)] if system_prompt.strip() else []
    shown: set[int] = set()
    for index, turn in enumerate(turns):
        if not turn.from_documents:
            messages.append(ChatMessage("user", turn.question))
            if index < len(turns) - 1:
                messages.append(ChatMessage("assistant", turn.answer))
            continue
        new = [s for s in turn.sources if s.number not in shown]
        above = [s.number for s in turn.sources if s.number in shown]
        messages.append(ChatMessage("user", rag_question(turn.question, new, above)))
        shown.update(s.number for s in new)
        if index < len(turns) - 1:
            messages.append(ChatMessage("assistant", turn.answer))
    return messages


def assemble(
    system_prompt: str, turns: Sequence[DocumentsTurn], budget_tokens: int, count: TokenCounter, keep_from: int = 0
) -> DocumentsPrompt:
    """The prompt for the last of ``turns``, within ``budget_tokens``. ``keep_from``: the first turn the
    conversation's previous prompt kept (what it left out stays out)."""
    if not turns:
        raise ValueError("assemble needs the turn being asked")
    last = len(turns) - 1
    keep_from = min(max(keep_from, 0), last)
    rendered: dict[int, tuple[list[ChatMessage], int]] = {}

    def prompt(cut: int) -> DocumentsPrompt:
        if cut not in rendered:
            messages = turn_messages(system_prompt, turns[cut:])
            rendered[cut] = (messages, count(messages))
        messages, tokens = rendered[cut]
        return DocumentsPrompt(tuple(messages), cut, tokens)

    if (kept := prompt(keep_from)).prompt_tokens <= budget_tokens:
        return kept
    alone = prompt(last).prompt_tokens
    if alone > budget_tokens:
        raise ContextTooLong(
            f"This message needs {alone} tokens with the system prompt and its passages, but only {budget_tokens} "
            "fit in the model's context window after room for the answer.",
            "Shorten the message (or the system prompt), or raise the context length with --context.",
            page_remedy="Shorten the message or the System prompt (under Answer settings), or ask without documents.",
        )
    # The fewest turns left out that bring the prompt under the refit target (or, failing that, under the budget).
    # Tokens only fall as more turns are left out, so a binary search finds it.
    target = max(int(budget_tokens * REFIT_SHARE), alone)
    low, high, cut = keep_from + 1, last, last
    while low <= high:
        middle = (low + high) // 2
        if prompt(middle).prompt_tokens <= target:
            cut, high = middle, middle - 1
        else:
            low = middle + 1
    return prompt(cut)


def replayed_cut(system_prompt: str, turns: Sequence[DocumentsTurn], budget_tokens: int, count: TokenCounter) -> int:
    """The first turn the previous prompt of this conversation kept, worked out again from its turns (for a client
    that sends the whole history each time and no memory of what was left out)."""
    cut = 0
    for end in range(1, len(turns)):
        try:
            cut = assemble(system_prompt, turns[:end], budget_tokens, count, cut).first_turn
        except ContextTooLong:
            cut = end - 1
    return cut


def paired_turns(messages: Sequence[ChatMessage]) -> list[tuple[str, str]] | None:
    """Earlier turns as (question, answer) pairs, or None when they do not alternate that way."""
    if len(messages) % 2 or any(m.role != ("user" if i % 2 == 0 else "assistant") for i, m in enumerate(messages)):
        return None
    return [(q.content, a.content) for q, a in zip(messages[::2], messages[1::2], strict=True)]
