"""Finding the figures in the project's Markdown that name no file of measurements.

A figure is a number with a unit of measure (×, ms, s, %, tok/s, MB…). Every measured figure a user reads must name,
in the same paragraph, the file under ``bench/data/`` that holds it. A table belongs to the paragraph just above it
(its caption), and shares its file with the paragraph just below it (which reads it, or names its files). Not
measurements, and so not asked for a file: numbers in code (inside backticks or fenced blocks), a setting's value
written beside the setting, and limits and defaults ("at most 2 MB", "after 10 minutes", "a 256 MB cap"), which the
product's code holds rather than a benchmark."""

from __future__ import annotations

import re
from dataclasses import dataclass

FENCED = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
UNITS = (
    r"×|x(?![\w-]|\s?\d)|ms(?!\w)|s(?!\w)|%|tok/s|tokens/s|tokens a second"
    r"|MB(?!\w)|GB(?!\w)|MiB(?!\w)|GiB(?!\w)|KiB(?!\w)|GB/s|Gbit/s|Mbit/s|min(?!\w)|minutes(?!\w)|seconds(?!\w)"
)
FIGURE = re.compile(r"(?<![\w.\-/])(\d[\d,]*(?:\.\d+)?)(?:\s?(?:–|-|to)\s?\d[\d,]*(?:\.\d+)?)?\s?(?:" + UNITS + ")")
# Words that make what follows a limit, a default or a size someone chose, not a measurement.
LIMIT = re.compile(
    r"(?:at most|up to|over|under|more than|less than|within|every|after|limit(?:s|ed)?(?: of)?|caps?(?:ped)? at|"
    r"defaults? (?:of|is|to)|by default|timeout of|deadline of|above|below|at least|longer than|past|beyond|"
    r"exceeds?|no more than|for|waits|then)\s+\(?(?:a\s+|the\s+|an\s+)?$",
    re.I,
)
LIMIT_NOUN = re.compile(r"^\s+(?:cap|limit|deadline|timeout|budget)s?\b", re.I)  # "a 120 s deadline"
SETTING_BESIDE = re.compile(r"``\s*[,:=]?\s*$")  # "(``, 60 s)": the setting's value, given right after its name
SETTING_AFTER = re.compile(r"^(?:\s+[\w-]+){0,3}\s*\(``")  # "1 GB of memory (``)": the value, then the setting


@dataclass(frozen=True)
class Unbacked:
    """A figure in a paragraph that names no file under bench/data/."""

    line: int
    figure: str
    context: str


def paragraphs(text: str) -> list[tuple[int, str]]:
    """The Markdown's paragraphs with the line each starts on, code blocks blanked (line numbers kept), and each
    table joined to the paragraph above it. A list item is a paragraph of its own."""
    text = FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    found: list[tuple[int, list[str]]] = []
    previous_blank = True
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            previous_blank = True
            continue
        table = line.lstrip().startswith("|")
        item = re.match(r"\s{0,3}(?:[-*+]|\d+\.)\s", line) is not None
        after_table = found and found[-1][1][-1].lstrip().startswith("|")
        continues_table = table and after_table
        caption = table and found and not after_table
        if found and ((not previous_blank and not item) or continues_table or caption):
            start, lines = found[-1]
            lines += [""] * (number - start - len(lines))  # blank lines kept, so each line keeps its number
            lines.append(line)
        else:
            found.append((number, [line]))
        previous_blank = False
    return [(start, "\n".join(lines)) for start, lines in found]


def unbacked(text: str) -> list[Unbacked]:
    """The figures of ``text`` (Markdown) whose paragraph names no file under bench/data/."""
    missing = []
    found = paragraphs(text)
    names = ["bench/data/" in paragraph for _, paragraph in found]
    for i, (start, paragraph) in enumerate(found):
        # A table and the paragraph just after it (its reading, or its "Files:" line) share their file.
        table = paragraph.rstrip().endswith("|")
        after_table = i > 0 and found[i - 1][1].rstrip().endswith("|")
        if names[i] or (table and i + 1 < len(found) and names[i + 1]) or (after_table and names[i - 1]):
            continue
        plain = CODE.sub("``", paragraph)
        for match in FIGURE.finditer(plain):
            before, after = plain[max(0, match.start() - 40) : match.start()], plain[match.end() :]
            if LIMIT.search(before) or SETTING_BESIDE.search(before) or SETTING_AFTER.match(after):
                continue
            if LIMIT_NOUN.match(after):
                continue
            line = start + plain[: match.start()].count("\n")
            context = plain[max(0, match.start() - 50) : match.end() + 10].replace("\n", " ")
            missing.append(Unbacked(line, match.group(0), context))
    return missing
