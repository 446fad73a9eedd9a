"""Rules for a question set written in a user's own words: a question shares no run of four words with
the passage it was written from, and every expected string is copied from that passage. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence

RUN_WORDS = 4


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def shared_run(question: str, passage: str, length: int = RUN_WORDS) -> str | None:
    """The first run of ``length`` words the question shares with the passage, or None."""
    asked = words(question)
    found = set(zip(*(words(passage)[i:] for i in range(length)), strict=False))
    for start in range(len(asked) - length + 1):
        run = tuple(asked[start : start + length])
        if run in found:
            return " ".join(run)
    return None


def missing_expected(expected: Sequence[str | Sequence[str]], passage: str) -> list[str]:
    """The expected strings (for a list of alternatives: the first of them) that the passage does not hold, case
    aside; for alternatives, one of them is enough."""
    text = passage.lower()
    missing = []
    for item in expected:
        options = [item] if isinstance(item, str) else list(item)
        if not any(option.lower() in text for option in options):
            missing.append(options[0])
    return missing
