"""Words a PDF broke at the end of a line, joined again. Pure.

Typeset manuals hyphenate at line ends, and a PDF keeps the break: its text reads "Environ-\\nment" and
"char- acters", so a passage shows the break and keyword search sees "environ" and "ment". A broken word is
letters, a hyphen, then a line break or spaces, then a lowercase letter. Whether the hyphen belongs to the word
is decided by the document itself: the joined word, or another form of it, appearing elsewhere in it
("environment", "understand" for "under-stands") means join; the
hyphenated word appearing elsewhere unbroken ("built-in") means keep the hyphen; failing both, a hyphen between
two parts that are each words of the document ("command-line") is kept, and any other break (a syllable such as
"acters") is joined.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# letters, a hyphen, a line break and/or spaces (no space before the hyphen: "a - b" is a dash), a lowercase letter.
_BROKEN = re.compile(r"(?<![\w-])([A-Za-z][A-Za-z']*)-[ \t]*(?:\n[ \t]*|[ \t]+)([a-z][A-Za-z']*)")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
# After a hyphen, these start the rest of a sentence ("pre- and post-processing"), not the rest of a word.
_CONTINUATIONS = frozenset({"and", "or", "nor", "to", "than", "as"})
# Endings by which one word of the document vouches for another form of it.
_SUFFIXES = ("s", "es", "d", "ed", "ing", "er", "ers", "ly")
_MIN_STEM = 4


def _inflection_known(whole: str, words: frozenset[str]) -> bool:
    """Whether another form of ``whole`` is a word of the document ("understands" when it says "understand")."""
    for suffix in _SUFFIXES:
        if whole.endswith(suffix) and len(whole) - len(suffix) >= _MIN_STEM and whole[: -len(suffix)] in words:
            return True
    return any(f"{whole}{suffix}" in words for suffix in _SUFFIXES)


def vocabulary(texts: Iterable[str]) -> frozenset[str]:
    """Every word of the document in lower case, whole hyphenated words included ("built-in"), but none of
    the pieces around a line-end break."""
    words: set[str] = set()
    for text in texts:
        unbroken = _BROKEN.sub(" ", text)
        for word in _WORD.findall(unbroken):
            lowered = word.lower()
            words.add(lowered)
            if "-" in lowered:
                words.update(part for part in lowered.split("-") if part)
    return frozenset(words)


def join_broken_words(text: str, words: frozenset[str]) -> str:
    """``text`` with each line-end break joined: without the hyphen, or with it where ``words`` (the document's
    vocabulary) says the hyphen is part of the word."""

    def joined(match: re.Match[str]) -> str:
        head, tail = match.group(1), match.group(2)
        if tail in _CONTINUATIONS:
            return match.group(0).replace("\n", " ")
        whole, hyphenated = f"{head}{tail}".lower(), f"{head}-{tail}".lower()
        if whole in words or _inflection_known(whole, words):
            return f"{head}{tail}"
        if hyphenated in words or (head.lower() in words and tail.lower() in words):
            return f"{head}-{tail}"
        return f"{head}{tail}"

    return _BROKEN.sub(joined, text)


def join_broken_words_in(pages: Sequence[str]) -> list[str]:
    """Every page of one document with its broken words joined, judged against the whole document's words."""
    words = vocabulary(pages)
    return [join_broken_words(page, words) for page in pages]


def broken_word_count(text: str) -> int:
    """How many line-end breaks ``text`` still holds (for measuring a corpus before and after)."""
    return sum(1 for match in _BROKEN.finditer(text) if match.group(2) not in _CONTINUATIONS)
