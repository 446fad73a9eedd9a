"""A prompt cut at the texts whose cache may be kept and joined elsewhere (the passages of an
answer from documents), and read as tokens piece by piece so that each such text is the same tokens wherever it
appears. Pure: the tokenizer is passed in.

A text is cut with the space before it, when there is one ("[2] The tower…" gives "[2]" and " The tower…"), so
its first token is the one the whole prompt would have had; tokens never cross a cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

Tokenize = Callable[[str, bool], list[int]]  # text, whether it begins the prompt (and gets the BOS) -> tokens


@dataclass(frozen=True)
class Segment:
    text: str
    kept: bool  # one of the texts whose cache may be kept


@dataclass(frozen=True)
class Span:
    """The tokens ``start`` to ``stop`` (exclusive) of a prompt: one kept text."""

    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start


def segments(prompt: str, kept: Sequence[str]) -> list[Segment]:
    """``prompt`` cut at each of ``kept``, looked for in their order, each after the one before; a text that is
    not there (or is empty) is passed over. The segments joined give ``prompt`` back."""
    cut: list[Segment] = []
    at = 0
    for text in kept:
        if not text.strip():
            continue
        found = prompt.find(text, at)
        if found < 0:
            continue
        begin = found - 1 if found > at and prompt[found - 1] == " " else found
        if begin > at:
            cut.append(Segment(prompt[at:begin], kept=False))
        cut.append(Segment(prompt[begin : found + len(text)], kept=True))
        at = found + len(text)
    if at < len(prompt):
        cut.append(Segment(prompt[at:], kept=False))
    return cut


def tokenized(parts: Sequence[Segment], tokenize: Tokenize) -> tuple[list[int], list[Span]]:
    """The prompt's tokens, read segment by segment, and where each kept text lies among them."""
    tokens: list[int] = []
    spans: list[Span] = []
    for index, part in enumerate(parts):
        piece = tokenize(part.text, index == 0)
        if part.kept and piece:
            spans.append(Span(len(tokens), len(tokens) + len(piece)))
        tokens.extend(piece)
    return tokens, spans
