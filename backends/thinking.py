"""A model's thinking kept out of its answer.

Reasoning models (Qwen3, DeepSeek-R1's distillations, QwQ) write their thinking first, between ``<think>`` and
``</think>``, then the answer. Hearth asks their templates for an answer without thinking (``enable_thinking`` false
in Qwen3's, which then writes an empty thinking block into the prompt itself): on a personal computer's CPU a
thinking phase is often hundreds of tokens before the first word of the answer. Models that think whatever they are
asked still do, and some templates open the thinking in the prompt so that the answer starts inside it; either way
what the person sees, what is stored and what the next turn reads is the answer alone.

An answer whose thinking never closes (cut by the length limit) is shown as written, thinking and all: an empty
answer would tell the person nothing.

Pure.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass

from backends.base import ChatEvent, Finished, TextDelta

OPEN, CLOSE = "<think>", "</think>"


def opens_thinking(prompt: str) -> bool:
    """Whether ``prompt`` ends inside an opened thinking block (the answer starts in the model's thinking)."""
    return prompt.rstrip().endswith(OPEN)


def without_thinking(events: Iterable[ChatEvent], opened: bool = False) -> Iterator[ChatEvent]:
    """``events`` with the text of a thinking block at the answer's start left out; ``opened`` when the prompt
    opened it (:func:`opens_thinking`)."""
    scanner = ThinkingScanner(inside=opened)
    source = iter(events)
    try:
        for event in source:
            if isinstance(event, TextDelta):
                if shown := scanner.feed(event.text):
                    yield TextDelta(shown)
                continue
            if isinstance(event, Finished) and (tail := scanner.finish()):
                yield TextDelta(tail)
            yield event
    finally:
        if isinstance(source, Generator):
            source.close()  # a reader that stops early stops the answer at once (its generator's own cleanup)


@dataclass
class ThinkingScanner:
    """Reads an answer as it streams and gives back the part to show: a thinking block at its start (after
    spaces) is held back, the text after it goes out as it comes."""

    inside: bool = False
    _held: str = ""
    _written: str = ""  # the thinking as written, shown only if it never ends
    _opening: bool = True  # nothing but spaces has been read (a thinking block may still begin)
    _after: bool = False  # the block has just closed: spaces before the answer are left out

    def __post_init__(self) -> None:
        if self.inside:
            self._written = OPEN
            self._opening = False

    def feed(self, text: str) -> str:
        self._held += text
        if self._opening:
            begun = self._held.lstrip()
            if begun.startswith(OPEN):
                self._written, self._held = OPEN, begun[len(OPEN) :]
                self.inside, self._opening = True, False
            elif OPEN.startswith(begun):
                return ""
            else:
                self._opening = False
        if self.inside:
            end = self._held.find(CLOSE)
            if end < 0:
                keep = _partial(self._held, CLOSE)
                self._written += self._held[: len(self._held) - keep]
                self._held = self._held[len(self._held) - keep :]
                return ""
            self._held = self._held[end + len(CLOSE) :]
            self.inside, self._after, self._written = False, True, ""
        shown, self._held = self._held, ""
        if self._after:
            shown = shown.lstrip()
            self._after = not shown
        return shown

    def finish(self) -> str:
        """What is left when the answer ends: held text, or an unfinished thinking block as written."""
        held, self._held = self._held, ""
        if self.inside:
            self.inside = False
            return self._written + held
        return "" if self._after else held


def _partial(text: str, marker: str) -> int:
    """How many characters at the end of ``text`` could begin ``marker``."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0
