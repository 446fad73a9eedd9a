"""Whether each file attached to a conversation goes to the model whole or is searched, for one question.

Pure policy: the caller counts tokens and applies the plan. A file goes whole when it fits, with the files before it
that went whole, in a share of the room the prompt leaves for passages; the rest of that room stays for the
conversation so far and for passages found in searched files and in a collection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Mode = Literal["whole", "searched"]
# Whole files may fill this share of the room for passages.
WHOLE_SHARE = 0.75
# A text of more characters than this many per token of room is not counted: it cannot fit (no tokenizer makes
# fewer tokens than one per 8 characters of ordinary text), and counting a long file's tokens costs time.
CHARS_PER_TOKEN_CEILING = 8


@dataclass(frozen=True)
class AttachmentUse:
    """How one attached file served one answer, shown under the answer: given whole, or searched with ``passages``
    of its passages given."""

    name: str
    mode: Mode
    passages: int = 0

    @property
    def words(self) -> str:
        if self.mode == "whole":
            return f"{self.name}: whole file in context"
        used = (
            f"{self.passages} passage{'s' if self.passages != 1 else ''} used" if self.passages else "nothing matched"
        )
        return f"{self.name}: searched, {used}"


def worth_counting(chars: int, room_tokens: int) -> bool:
    """Whether a text of ``chars`` characters could fit in ``room_tokens`` at all (else it is searched uncounted)."""
    return chars <= room_tokens * CHARS_PER_TOKEN_CEILING


def plan_attachments(token_counts: Sequence[int | None], room_tokens: int) -> list[Mode]:
    """One mode per file, in the order attached: "whole" while the whole files together fit in ``WHOLE_SHARE`` of
    ``room_tokens`` (a later, smaller file may still fit after a larger one did not); ``None`` is a file too long
    to count, which is searched."""
    allowance = int(room_tokens * WHOLE_SHARE)
    used = 0
    modes: list[Mode] = []
    for tokens in token_counts:
        if tokens is not None and used + tokens <= allowance:
            used += tokens
            modes.append("whole")
        else:
            modes.append("searched")
    return modes
