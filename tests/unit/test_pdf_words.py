"""Words a PDF broke at line ends (rag.reading.pdf_words): joined, or kept hyphenated, as the document's own words
say."""

from __future__ import annotations

import pytest

from rag.reading.pdf_words import broken_word_count, join_broken_words, join_broken_words_in, vocabulary

DOCUMENT = [
    "The environment holds variables. Each built-in command reads the command line.",
    "Special char- acters need quoting. The Environ-\nment is passed to every child.",
    "Use the built-\nin help. Both the command-\nline and the environment matter.",
    "Pre- and post-processing run in order; git ls-files lists files; set -e stops early.",
]


@pytest.mark.parametrize(
    ("broken", "joined"),
    [
        ("Environ-\nment", "Environment"),  # "environment" is a word of the document
        ("char- acters", "characters"),  # neither half "acters" is a word: a syllable break
        ("built-\nin", "built-in"),  # "built-in" appears whole elsewhere: a real hyphen
        ("command-\nline", "command-line"),  # both halves are words, and the joined form is not
        ("Pre- and", "Pre- and"),  # a suspended hyphen before "and" is left alone
        ("ls-files", "ls-files"),
        ("set -e", "set -e"),
        ("a - b", "a - b"),
        ("non-\nASCII", "non-\nASCII"),  # the rest starts with a capital: not a broken word
    ],
)
def test_a_break_is_joined_as_the_document_writes_the_word(broken: str, joined: str) -> None:
    assert join_broken_words(broken, vocabulary(DOCUMENT)) == joined


def test_every_page_is_judged_against_the_whole_document() -> None:
    pages = join_broken_words_in(DOCUMENT)
    assert "Special characters need quoting. The Environment is passed" in pages[1]
    assert "Use the built-in help. Both the command-line and" in pages[2]
    assert pages[3] == DOCUMENT[3]
    assert sum(broken_word_count(page) for page in pages) == 0
    assert sum(broken_word_count(page) for page in DOCUMENT) == 4


def test_the_pieces_of_a_break_are_not_words_of_the_document() -> None:
    words = vocabulary(["Environ-\nment and char- acters", "ls-files"])
    assert "environ" not in words and "ment" not in words and "acters" not in words
    assert {"and", "ls-files", "ls", "files"} <= words


def test_another_form_of_the_joined_word_vouches_for_it() -> None:
    words = vocabulary(["Bash can understand the line and stands by it; which under the hood", "tests"])
    assert join_broken_words("Readline under-\nstands the keys", words) == "Readline understands the keys"
    assert join_broken_words("a single te-\nst", words) == "a single test"  # "tests" vouches for "test"
