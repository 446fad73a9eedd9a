"""Cutting a prompt at the texts whose cache may be kept (``backends.llamacpp.caches.prompt_spans``), with a tokenizer
of one token per word (and a BOS at the start)."""

from __future__ import annotations

from backends.llamacpp.caches.prompt_spans import Segment, Span, segments, tokenized

PROMPT = "<s>user\nPassages:\n\n[1] The tower is tall.\n\n[2] The mountain is high.\n\nQuestion: how tall?"
TOWER, MOUNTAIN = "The tower is tall.", "The mountain is high."


def words(text: str, first: bool) -> list[int]:
    return ([0] if first else []) + [len(word) for word in text.split()]


def test_the_prompt_is_cut_at_each_text_with_the_space_before_it() -> None:
    parts = segments(PROMPT, [TOWER, MOUNTAIN])
    assert "".join(p.text for p in parts) == PROMPT
    assert [p for p in parts if p.kept] == [Segment(" " + TOWER, True), Segment(" " + MOUNTAIN, True)]
    assert parts[0] == Segment("<s>user\nPassages:\n\n[1]", False)


def test_texts_are_looked_for_in_order_and_one_not_there_is_passed_over() -> None:
    assert [p.text for p in segments(PROMPT, [MOUNTAIN, TOWER]) if p.kept] == [" " + MOUNTAIN]  # tower is before it
    assert [p.text for p in segments(PROMPT, ["absent", "", TOWER]) if p.kept] == [" " + TOWER]
    assert segments(PROMPT, []) == [Segment(PROMPT, False)]
    assert [p.text for p in segments("The tower is tall.", [TOWER])] == [TOWER]  # nothing before, no space to take


def test_spans_say_where_each_text_lies_among_the_tokens() -> None:
    tokens, spans = tokenized(segments(PROMPT, [TOWER, MOUNTAIN]), words)
    assert tokens[0] == 0  # the BOS, once, at the start
    assert spans == [Span(4, 8), Span(9, 13)]
    assert tokens[4:8] == words(TOWER, False) and tokens[9:13] == words(MOUNTAIN, False)
    assert len(spans[0]) == 4
