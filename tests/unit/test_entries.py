"""Option entries of a manual as its PDF gives them: a passage that begins inside one gets its defining sentence
from the passages before it, and nothing else does."""

from __future__ import annotations

from rag.reading.entries import entry_head, entry_starts, last_entry_start

BEFORE = (
    "When options are supplied, they have the following meanings:\n"
    "-a Each variable or function that is created is marked for export.\n"
    "-e Exit immediately if a pipeline, a list or a compound command\n"
    "returns a non-zero status. The shell does not exit if the command that\n"
)
INSIDE = "fails is part of the test in an if statement, or part of a && or || list.\nA trap on ERR is run first."


def test_a_passage_inside_an_entry_gets_the_entrys_defining_sentence() -> None:
    head = entry_head([BEFORE], INSIDE)
    assert head == "-e Exit immediately if a pipeline, a list or a compound command returns a non-zero status."


def test_the_nearest_passage_before_is_searched_first_and_a_plain_one_is_left_alone() -> None:
    assert entry_head(["-z Older entry.\n", "no entries here\n"], INSIDE) == "-z Older entry."
    assert entry_head(["plain prose with no options at all.\n"], INSIDE) is None
    assert entry_head([], INSIDE) is None


def test_a_passage_that_begins_an_entry_or_holds_its_opening_needs_no_head() -> None:
    assert entry_head([BEFORE], "-u Treat unset variables as an error.") is None
    overlapping = "-e Exit immediately if a pipeline, a list or a compound command\nreturns a non-zero status."
    assert entry_head([BEFORE], "the end of -a.\n" + overlapping) is None


def test_entry_starts_are_option_lines_that_say_something() -> None:
    text = "Intro line.\n-k\n--keep-index All changes are left.\n--quiet Say nothing.\n"
    starts = [i for i in range(len(text)) if (i == 0 or text[i - 1] == "\n") and entry_starts(text, i)]
    assert [text[i : text.index("\n", i)] for i in starts] == ["--quiet Say nothing."]  # -k names --keep-index
    assert last_entry_start(text) == text.index("--quiet")
    assert last_entry_start("no options here") is None
