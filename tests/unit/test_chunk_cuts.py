"""Where chunks are cut, on token spans made by hand (words and punctuation, as a BERT tokenizer splits them)."""

from __future__ import annotations

import re

from rag.chunking import BLOCK_CHARS, block_end, cut_before, next_start


def spans(text: str) -> list[tuple[int, int]]:
    return [match.span() for match in re.finditer(r"\w+|[^\w\s]", text)]


def piece(text: str, start: int, stop: int) -> str:
    found = spans(text)
    return text[found[start][0] : found[stop - 1][1]]


def test_a_chunk_ends_at_the_last_paragraph_break_in_its_window() -> None:
    text = "one two three.\n\nfour five six seven.\n\neight nine ten eleven twelve thirteen"
    stop = cut_before(text, spans(text), 0, 12)
    assert piece(text, 0, stop) == "one two three.\n\nfour five six seven."


def test_without_paragraphs_a_sentence_end_wins_over_a_space() -> None:
    text = "a b c d. e f g h i j k l m n"
    stop = cut_before(text, spans(text), 0, 10)
    assert piece(text, 0, stop) == "a b c d."


def test_text_without_any_break_is_cut_at_the_full_size() -> None:
    text = "数" * 50
    character_spans = [(i, i + 1) for i in range(50)]
    assert cut_before(text, character_spans, 0, 20) == 20


def test_a_break_too_early_in_the_window_is_not_taken() -> None:
    text = "a.\n\nb c d e f g h i j k l m n o p q r s t u v w x y z"
    stop = cut_before(text, spans(text), 0, 20)
    assert stop == 20  # a two-token chunk would waste the window; the paragraph break is in its first quarter


def test_the_last_chunk_takes_what_is_left() -> None:
    text = "a b c"
    assert cut_before(text, spans(text), 1, 200) == 3


def test_the_next_chunk_overlaps_from_the_start_of_a_word() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta"
    found = spans(text)
    start = next_start(text, found, 0, 6, overlap=2)
    assert text[found[start][0] :].startswith("epsilon")
    assert next_start(text, found, 0, 6, overlap=0) == 6


def test_the_next_chunk_always_moves_forward() -> None:
    text = "数" * 10
    character_spans = [(i, i + 1) for i in range(10)]
    assert next_start(text, character_spans, 3, 4, overlap=32) == 4


def test_blocks_end_at_a_line_break_or_a_space() -> None:
    words = ("word " * (BLOCK_CHARS // 5 + 100)).strip()
    end = block_end(words, 0)
    assert end <= BLOCK_CHARS and words[end - 1] == " "
    assert block_end("short text", 0) == len("short text")
    solid = "x" * (BLOCK_CHARS * 2)
    assert block_end(solid, 0) == BLOCK_CHARS


OPTIONS = (
    "When options are supplied, they have the following meanings:\n"
    "-a Each variable or function that is created is marked for export to the environment of\n"
    "subsequent commands and stays so until it is unset again by the user.\n"
    "-e Exit immediately if a pipeline returns a non-zero status, unless the command that fails\n"
    "is part of a condition.\n"
)


def test_a_chunk_in_an_option_list_ends_where_an_entry_starts_not_inside_one() -> None:
    found = spans(OPTIONS)
    stop = cut_before(OPTIONS, found, 0, len(found) - 3)
    assert OPTIONS[found[stop][0] :].startswith("-e Exit immediately")  # the entry keeps its defining line


def test_names_of_one_option_on_lines_of_their_own_stay_together() -> None:
    text = "Options follow, each with what it does.\n-k\n--keep-index All changes already added are left intact."
    found = spans(text)
    keep = next(k for k in range(len(found)) if text[found[k][0] :].startswith("--keep-index"))
    assert _rank(text, found, keep) == 3  # a line break, not an entry's start: -k names the same entry


def _rank(text: str, found: list[tuple[int, int]], k: int) -> int:
    from rag.chunking import _gap_rank

    return _gap_rank(text, found, k)
