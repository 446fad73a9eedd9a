"""Guess the encoding of a legacy (non-UTF-8) text file.

Short files defeat byte statistics alone: chardet's first guess for a French menu in Windows-1252 can be
Cyrillic. So the top guesses are decoded and the most plausible text wins — real words do not mix scripts
(Latin and Cyrillic in one word) and real prose has few stray symbols — with chardet's own order breaking ties.
"""

from __future__ import annotations

import re
import unicodedata

CANDIDATES = 8
_WORD = re.compile(r"\w+")
# Non-letter characters that are ordinary in real text.
_COMMON_SYMBOLS = frozenset("«»€–—‘’‚“”„…•°§©®™±×÷¡¿·ªº¹²³¼½¾。、「」『』・（）！？：")


def _script(char: str) -> str:
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0]


def implausibility(text: str) -> int:
    """How unlike real text a decoding looks: words mixing scripts, stray symbols, control characters."""
    score = 0
    for word in _WORD.findall(text):
        scripts = {_script(ch) for ch in word if ch.isalpha()}
        scripts.discard("")
        if len(scripts) > 1:
            score += 1
    for char in text:
        if ord(char) < 128:
            continue
        if unicodedata.category(char) in ("Co", "Cn", "Cc"):
            score += 2
        elif not char.isalpha() and not char.isspace() and char not in _COMMON_SYMBOLS:
            score += 1
    return score


def guess_legacy_encoding(raw: bytes) -> str | None:
    import chardet

    best: tuple[int, int, str] | None = None
    guesses = [str(g["encoding"]) for g in chardet.detect_all(raw)[:CANDIDATES] if g.get("encoding")]
    for rank, encoding in enumerate(guesses):
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
        candidate = (implausibility(text), rank, encoding)
        if best is None or candidate < best:
            best = candidate
    return best[2] if best else None
