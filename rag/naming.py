"""Answers that point at a passage instead of saying what it says, and the name that fills the gap.

Small models sometimes put the citation where the answer belongs: "The command that must an application run after
installing or changing its MIME XML file is [1]." Such an answer has no term of its own: every word is the
question's, common English, or about citing. Measured on the two answer sets under ``bench/data/`` with
Qwen2.5-Coder-1.5B, 4 of the 12 wrong answers were of this kind. Asking the model once more, briefly, with the
answer in front of it ("Which exact name, as written in the passage you cited, answers my question?") named the
answer for 2 of the 4 (``update-mime-database``, ``symdiff``); the rule below keeps a reply only when it is a short
name whose own terms the cited passage holds, so a reply that repeats the question or invents a name is dropped
and the answer stays as it was written.

Pure: no model. ``app/services/answering/naming.py`` asks the question and applies the result.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rag.citations import COMMON, terms_of
from rag.prompt import CITATION_MARKER, Source, marker_numbers

FOLLOW_UP = "Which exact name, as written in the passage you cited, answers my question? Reply with that name only."
MAX_NAME_WORDS = 6
MAX_NAME_CHARS = 80
# Words before a marker that make it a pointer ("listed in [1]"): the name goes after the marker there.
_POINTING = frozenset({"in", "from", "see", "at"})
_UNQUOTE = re.compile(r"^[\s`'\"“”‘’*]+|[\s`'\"“”‘’*.:;,]+$")


@dataclass(frozen=True)
class Named:
    """The name a follow-up gave for an answer that pointed at passage ``number``, and the answer with it."""

    number: int
    name: str
    text: str

    @property
    def words(self) -> str:
        return f"Named from passage [{self.number}]: {self.name}"


def pointed_at(answer: str, question: str, sources: Sequence[Source]) -> int | None:
    """The passage ``answer`` points at in place of an answer, or None when it says something of its own (a term
    not in the question, not common English and not about citing) or cites nothing that was given."""
    given = {s.number for s in sources}
    asked = terms_of(question)
    if any(t not in asked and t not in COMMON for t in terms_of(answer)):
        return None
    for match in CITATION_MARKER.finditer(answer):
        for number in marker_numbers(match.group(1)):
            if number in given:
                return number
    return None


def fill_name(answer: str, number: int, reply: str, question: str, sources: Sequence[Source]) -> Named | None:
    """``answer`` with the name the follow-up ``reply`` gave, set beside the first marker that cites ``number``;
    None when the reply is not a short name that one of the passages holds (beyond the question's own words).
    The name may come from another passage than the one cited: the citation check that follows moves the marker
    to the passage that holds it."""
    name = _UNQUOTE.sub("", CITATION_MARKER.sub(" ", reply)).strip()
    if not name or "\n" in name or len(name) > MAX_NAME_CHARS or len(name.split()) > MAX_NAME_WORDS:
        return None
    asked = terms_of(question)
    own = {t for t in terms_of(name) if t not in asked and t not in COMMON}
    if not own or not any(own <= terms_of(s.text) for s in sources):
        return None
    for match in CITATION_MARKER.finditer(answer):
        if number not in marker_numbers(match.group(1)):
            continue
        before = answer[: match.start()].rstrip()
        last_word = before.rsplit(None, 1)[-1].casefold() if before else ""
        if last_word in _POINTING:
            text = f"{answer[: match.end()]}: {name}{answer[match.end() :]}"
        else:
            text = f"{before} {name} {answer[match.start() :]}"
        return Named(number, name, text)
    return None
