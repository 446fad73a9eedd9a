"""Citations checked against the passages they name: a marker that points at a passage sharing none of the
answer's distinctive words is moved to the passage that holds them.

Small models put the right fact in the answer and the wrong number after it. Measured on the 32 questions of
``bench/data/debian-manuals-answers.jsonl`` with Qwen2.5-Coder-1.5B (five passages each): the answer was right for
26, but it cited a passage that holds the answer for only 19; it cited [1], [2] and [3] about equally and never [4]
or [5], while the answer was in [1] for 23 of them. The rule here is lexical and conservative:

* the claim a marker stands for is the answer's text since the previous marker (or since the start, when the
  sentence with the marker says nothing of its own, as in "... This is stated in [3].");
* its distinctive terms are its words and symbols (``%/%``, ``glp_set_row_bnds``, ``Normal01``) that are not in
  the question, not common English and not words about citing ("stated", "passage"), and that some passage holds;
* a marker is moved only when the passage it names holds none of those terms, to the passage that holds the most
  of them (the better-ranked one on a tie). A marker whose passage holds even one is left alone, and so is an
  answer whose claim has no distinctive term.

Pure: no model, no store. The chat service applies it to an answer when it ends; the answer as saved (and as the
page shows it once complete) carries the moved markers, and :class:`Moved` says what was changed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rag.prompt import CITATION_MARKER, Source, marker_numbers

# A term: a run of characters other than spaces, brackets, quotes and sentence punctuation; a trailing full stop or
# colon is not part of it, nor emphasis stars around it ("**card(X)**." gives "card" and "x").
_TERM = re.compile(r"[^\s\[\](){}<>\"'`“”‘’,;:!?]+")
_COMMON_WORDS = """
    a an the and or but if then else so as of to in on at by for with from into onto about over under than that this
    these those there here it its it's is are was were be been being do does did done has have had having can could
    will would shall should may might must not no yes also only just very more most less least some any each every
    all both either neither one two which what who whom whose when where why how you your we our they their them he
    she his her i me my use used using uses such other another same like e.g i.e etc way ways
    function functions routine routines operator operators command commands value values option options
    found find stated states state says say said described describes given gives mentioned according shown shows
    passage passages document documents source sources text see refer refers answer listed lists
    don doesn didn isn aren wasn weren won wouldn couldn shouldn haven hasn hadn ll ve re
"""
# The last line: what is left of a contraction split at its apostrophe ("don't" gives "don").
COMMON = frozenset(_COMMON_WORDS.split())


@dataclass(frozen=True)
class Moved:
    """One citation marker moved: the answer cited ``cited`` for a claim that passage ``to`` holds; ``to`` is None
    when ``cited`` names no passage given and none holds the claim (the number was taken off)."""

    cited: int
    to: int | None
    terms: tuple[str, ...]  # the distinctive terms that passage ``to`` holds and passage ``cited`` does not
    given: tuple[int, ...] = ()  # the passages' numbers, for the words of a number that names none

    @property
    def words(self) -> str:
        if self.to is None:
            listed = ", ".join(f"[{n}]" for n in self.given)
            return f"Citation removed: the answer cites [{self.cited}], which names no source (given: {listed})."
        said = ", ".join(f"“{t}”" for t in self.terms[:3])
        if self.given and self.cited not in self.given:
            cited = f"the answer cites [{self.cited}], which names no source"
            return f"Citation corrected: {cited}; [{self.to}] says {said}."
        return f"Citation corrected: the answer cites [{self.cited}], but it is passage [{self.to}] that says {said}."


@dataclass(frozen=True)
class CheckedAnswer:
    text: str
    moved: tuple[Moved, ...] = ()


def terms_of(text: str) -> set[str]:
    """The terms of ``text``, case-folded, without citation markers and without trailing dots."""
    found = set()
    for match in _TERM.finditer(CITATION_MARKER.sub(" ", text).casefold()):
        term = match.group().strip(".*")  # Markdown emphasis is not part of a name
        if term and (len(term) > 1 or not term.isalnum()):
            found.add(term)
    return found


def check_citations(answer: str, question: str, sources: Sequence[Source]) -> CheckedAnswer:
    """``answer`` with each marker that names a passage holding none of its claim's distinctive terms moved to the
    passage that holds the most of them. A number that names no passage given is moved the same way where a passage
    holds the claim, and taken off where none does (a marker left with no number goes, with the space before it)."""
    if not sources or not CITATION_MARKER.search(answer):
        return CheckedAnswer(answer)
    by_number = {s.number: terms_of(s.text) for s in sources}  # in rank order: the first is the best match
    given = tuple(by_number)
    asked = terms_of(question)
    held = set().union(*by_number.values())  # terms some passage holds
    pieces: list[str] = []
    moved: list[Moved] = []
    start = 0
    for match in CITATION_MARKER.finditer(answer):
        claim = _claim(answer[start : match.start()], asked, held)
        numbers = marker_numbers(match.group(1))
        new_numbers: list[int] = []
        for number in numbers:
            target = _better_passage(number, claim, by_number)
            if target is not None and target not in new_numbers and target not in numbers:
                moved.append(Moved(number, target, tuple(sorted(claim & by_number[target])), given))
                new_numbers.append(target)
            elif number not in by_number:  # nowhere to move it (or its passage is cited beside it): taken off
                moved.append(Moved(number, None, (), given))
            elif number not in new_numbers:
                new_numbers.append(number)
        before = answer[start : match.start()]
        if new_numbers == numbers:
            pieces += [before, match.group()]
        elif new_numbers:
            pieces += [before, f"[{', '.join(str(n) for n in new_numbers)}]"]
        else:
            pieces.append(before.rstrip(" "))
        start = match.end()
    pieces.append(answer[start:])
    return CheckedAnswer("".join(pieces), tuple(moved))


def _claim(before: str, asked: set[str], held: set[str]) -> set[str]:
    """The distinctive terms of the text before a marker: its last sentence's, or the whole stretch's when that
    sentence has none (the marker then stands alone in a sentence such as "This is stated in [3].")."""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", before.strip()) if s]
    last = _distinctive(sentences[-1] if sentences else "", asked, held)
    return last or _distinctive(before, asked, held)


def _distinctive(text: str, asked: set[str], held: set[str]) -> set[str]:
    return {t for t in terms_of(text) if t not in asked and t not in COMMON and t in held}


def _better_passage(number: int, claim: set[str], by_number: dict[int, set[str]]) -> int | None:
    """The passage to cite instead of ``number``: the one holding the most of the claim's terms, when ``number``
    holds none of them (or names no passage) and another holds some."""
    if not claim or (number in by_number and claim & by_number[number]):
        return None
    best = max(by_number, key=lambda n: len(claim & by_number[n]))  # max keeps the first (best-ranked) of a tie
    return best if claim & by_number[best] else None
