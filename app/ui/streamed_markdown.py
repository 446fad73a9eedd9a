"""safe_markdown for a text that only grows: an answer as it streams, redrawn many times a second.

Reading the whole answer again for every redraw costs more the longer it gets. The top-level blocks above the last
one cannot change when text is added at the end (a new line can only extend the last block or start another), so
they are rewritten once and kept; each redraw reads only the last block and what came after it. The one thing a
later line could still change above it, a reference definition, is resolved when the answer is read whole at the
end (``safe_markdown``).
"""

from __future__ import annotations

import re

from app.ui.safe_markdown import SafeBlock, join_blocks, safe_blocks

# How markdown-it splits lines (it reads "\r\n" and a lone "\r" as line ends too).
_LINE_END = re.compile(r"\r\n?|\n")


class StreamedMarkdown:
    def __init__(self) -> None:
        self._settled_source = ""  # the start of the text whose blocks are final
        self._settled: list[SafeBlock] = []

    def render(self, text: str) -> str:
        if not text.startswith(self._settled_source):  # not the same text grown: start over
            self._settled_source, self._settled = "", []
        tail = text[len(self._settled_source) :]
        blocks = safe_blocks(tail)
        if len(blocks) > 1:
            last_starts_at = _line_offset(tail, blocks[-1].first_line)
            self._settled += blocks[:-1]
            self._settled_source += tail[:last_starts_at]
            blocks = blocks[-1:]
        return join_blocks([*self._settled, *blocks])


def _line_offset(text: str, line: int) -> int:
    """Where line number ``line`` (from 0) of ``text`` begins."""
    if line == 0:
        return 0
    for number, end in enumerate(_LINE_END.finditer(text), start=1):
        if number == line:
            return end.end()
    return len(text)
