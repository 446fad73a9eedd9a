"""Training data from what Hearth already holds: saved conversations (the model learns to answer as they were
answered) and a collection's passages (plain language-model training on the user's documents). Each becomes a
JSON Lines file in one of the shapes ``models.tuning.dataset`` reads, so every source goes through the same
checks."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from app.services.library.conversations import Conversation
from models.shared.errors import TrainingDataError


def conversation_examples(conversations: Iterable[Conversation]) -> list[dict[str, object]]:
    """One chat example per conversation that has an answer in it (its system prompt and every turn)."""
    examples: list[dict[str, object]] = []
    for conversation in conversations:
        turns = [{"role": m.role, "content": m.content} for m in conversation.messages if m.content.strip()]
        while turns and turns[-1]["role"] != "assistant":
            turns.pop()  # a question left unanswered teaches nothing
        if not any(turn["role"] == "assistant" for turn in turns):
            continue
        if conversation.system_prompt.strip():
            turns.insert(0, {"role": "system", "content": conversation.system_prompt})
        examples.append({"messages": turns})
    return examples


def passage_examples(passages: Iterable[tuple[str | None, str]]) -> list[dict[str, object]]:
    """One text example per passage, under its section heading when it has one."""
    examples: list[dict[str, object]] = []
    for section, text in passages:
        if not text.strip():
            continue
        examples.append({"text": f"{section}\n\n{text}" if section else text})
    return examples


def write_examples(path: Path, examples: Sequence[dict[str, object]], empty: str, remedy: str) -> Path:
    """``examples`` as JSON Lines at ``path`` (written whole, then moved into place)."""
    if not examples:
        raise TrainingDataError(empty, remedy)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for example in examples:
            handle.write(json.dumps(example, ensure_ascii=False) + "\n")
    partial.replace(path)
    return path


def from_conversations(folder: Path, ids: Sequence[str], load: Callable[[str], Conversation]) -> tuple[Path, str]:
    """A data file from the conversations ``ids``, and its label ("3 conversations")."""
    if not ids:
        raise TrainingDataError("No conversations were chosen.", "Tick the conversations to learn from.")
    examples = conversation_examples(load(conversation_id) for conversation_id in ids)
    path = write_examples(
        folder / "conversations.jsonl",
        examples,
        "None of the chosen conversations has an answer to learn from.",
        "Choose conversations in which the model answered.",
    )
    label = f"{len(ids)} conversation" + ("" if len(ids) == 1 else "s")
    return path, label


def from_passages(folder: Path, collection: str, passages: Sequence[tuple[str | None, str]]) -> tuple[Path, str]:
    """A data file from a collection's passages, and its label ("the passages of work notes")."""
    path = write_examples(
        folder / "passages.jsonl",
        passage_examples(passages),
        f"The collection {collection!r} has no passages.",
        "Add files to it in the Documents tab, or choose another collection.",
    )
    return path, f"the passages of {collection}"
