"""Text as a person should read it in a passage: no invisible characters, no ligatures, no permalink marks, tidy
spacing.

Every loader's output passes through :func:`clean_text`, so the rules hold whatever the file type. Zero-width
characters and bidirectional controls make words that look equal compare unequal (and so miss keyword search);
soft hyphens split words; the "¶" that documentation generators put after headings (a link to the heading) ends
up as noise at the end of a line.
"""

from __future__ import annotations

import re

# Zero-width space/joiners, word joiner, BOM used as a zero-width no-break space, soft hyphen, and the
# bidirectional embedding/isolate controls: invisible in a passage, but they break words apart for search.
_INVISIBLE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff\u202a-\u202e\u2066-\u2069]")
# Spaces that are not ASCII spaces (no-break, thin, ideographic, …) read as one space.
_ODD_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
# A permalink mark: "¶" or "§" alone at the end of a line (after a heading, a definition or a paragraph).
_PERMALINK = re.compile(r"[ \t]*[¶§]+[ \t]*$", re.MULTILINE)
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.MULTILINE)
# A line that is only a separator bar (navigation "|", an empty table row's pipes).
_BAR_LINE = re.compile(r"^[ \t|]*\|[ \t|]*$\n?", re.MULTILINE)
_BLANK_RUNS = re.compile(r"\n{3,}")
# Typographic ligatures (PDFs of typeset manuals keep them): "ﬁle" must read, and be found, as "file".
_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "ft", "ﬆ": "st"})


def clean_text(text: str) -> str:
    """``text`` without invisible characters, permalink marks or lines that are only "|", lines without trailing
    spaces, and at most one blank line in a row."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _INVISIBLE.sub("", text).translate(_LIGATURES)
    text = _ODD_SPACES.sub(" ", text)
    text = _PERMALINK.sub("", text)
    text = _TRAILING_SPACE.sub("", text)
    text = _BAR_LINE.sub("", text)
    return _BLANK_RUNS.sub("\n\n", text).strip()


def clean_line(text: str) -> str:
    """One line of text (a heading, a table cell): cleaned as above, whitespace collapsed to single spaces."""
    return " ".join(clean_text(text).split())
