"""Option entries in manuals ("-e Exit immediately if a pipeline … returns a non-zero status."), as PDF manuals give
them: one line after another, with nothing but the option at the start of a line to set an entry apart. A passage
that begins inside a long entry, after the line that defines the option, leaves the model guessing what the option
does (seen with bash's `set -e`); :func:`entry_head` finds that line in the passages before it, so the search can
put it in front. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence

# A line that names an option and goes on to say what it does: "-e Exit immediately…", "--prefix=DIR Install…".
ENTRY = re.compile(r"[-+]{1,2}[A-Za-z0-9][\w=<>\[\]-]*[ \t]+\S")
# A line that is only an option's name (one of several names of the same entry, each on its own line).
OPTION_ALONE = re.compile(r"[-+]{1,2}[A-Za-z0-9][\w=<>\[\]-]*,?\s*$")
HEAD_CHARS = 400  # the most of an entry's first sentence put in front of a passage
SENTENCE_END = re.compile(r"[.!?](?=\s)")


def entry_starts(text: str, at: int) -> bool:
    """Whether the line beginning at ``at`` starts an option entry, after a line that is not an option name alone
    (``-k`` over ``--keep-index`` are two names of one entry)."""
    if not ENTRY.match(text, at):
        return False
    previous_end = text.rfind("\n", 0, at)
    if previous_end < 0:
        return True
    previous = text[text.rfind("\n", 0, previous_end) + 1 : previous_end]
    return not OPTION_ALONE.match(previous)


def last_entry_start(text: str) -> int | None:
    """Where the last option entry of ``text`` begins, or None."""
    starts = [0] if entry_starts(text, 0) else []
    starts += [m.end() for m in re.finditer(r"\n", text) if entry_starts(text, m.end())]
    return starts[-1] if starts else None


def entry_head(before: Sequence[str], passage: str) -> str | None:
    """The defining sentence of the option entry ``passage`` begins inside, found in the passages just before it
    (``before``, nearest last), or None when the passage begins an entry itself, holds that sentence already, or no
    entry is open where it begins."""
    if entry_starts(passage, 0):
        return None
    for text in reversed(before):
        start = last_entry_start(text)
        if start is None:
            continue
        rest = text[start : start + HEAD_CHARS]
        end = SENTENCE_END.search(rest)
        head = " ".join((rest[: end.end()] if end else rest.split("\n", 1)[0]).split())
        opening = " ".join(text[start : start + 40].split())
        return None if opening in " ".join(passage.split()) else head
    return None
