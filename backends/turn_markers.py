"""Text from outside kept from becoming a turn marker. Pure.

A prompt is rendered as one string and read with the model's special tokens recognised (the template's own
``<|im_start|>`` must become that token). So a tool's result, a passage or a message that contains the same
characters would become a real marker too: a web page could end the tool turn and open a system turn of its own.
Before rendering, each marker in such text gets an invisible word joiner after its first character: the model reads
the same characters as ordinary text, and no marker is made of them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from backends.base import ChatMessage, ToolCall, ToolSpec

JOINER = "\u2060"  # WORD JOINER: invisible, and no tokenizer joins it into a marker
# A special token worth guarding looks like markup: ordinary words and whitespace runs that some vocabularies list
# among their added tokens cannot turn text into a turn.
_MARKUP = frozenset("<>|[]")


def marker_texts(texts: Iterable[str]) -> tuple[str, ...]:
    """The special tokens among ``texts`` that text could spell out, longest first (so a marker inside a longer
    one is not matched first)."""
    kept = {t for t in texts if len(t) >= 3 and _MARKUP.intersection(t) and not t.isspace()}
    return tuple(sorted(kept, key=lambda t: (-len(t), t)))


class Defuser:
    """Rewrites text so none of ``markers`` appears in it (see the module's docstring)."""

    def __init__(self, markers: Sequence[str] = ()) -> None:
        self.markers = tuple(markers)
        pattern = "|".join(re.escape(m) for m in self.markers)
        self._pattern = re.compile(pattern) if pattern else None

    def text(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda found: found.group()[0] + JOINER + found.group()[1:], text)

    def messages(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        return [
            dataclasses.replace(
                m,
                content=self.text(m.content),
                tool_calls=tuple(self._call(c) for c in m.tool_calls),
            )
            for m in messages
        ]

    def tools(self, tools: Sequence[ToolSpec]) -> list[ToolSpec]:
        return [dataclasses.replace(t, description=self.text(t.description)) for t in tools]

    def _call(self, call: ToolCall) -> ToolCall:
        return dataclasses.replace(call, name=self.text(call.name), arguments=self.text(call.arguments))
