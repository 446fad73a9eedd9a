"""Text from outside (file names, paths, collection names, model metadata, document text) made safe to print
in a terminal.

A file called ``"evil\\x1b[2J\\nname.txt"`` would otherwise clear the screen and fake an extra line of output;
bidirectional overrides reorder what follows them, and names that are not valid UTF-8 (which Python decodes to
lone surrogates) make ``print`` raise. Every such character is shown as a visible escape (``\\x1b``, ``\\n``,
``\\u202e``) instead; ordinary text, accents and emoji pass through unchanged.
"""

from __future__ import annotations

import logging
import re

# C0 and C1 controls and DEL; bidirectional marks, embeddings, overrides and isolates; line and paragraph
# separators; lone surrogates (undecodable bytes in file names).
_OTHER_UNSAFE = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_OTHER_UNSAFE}]")
_UNSAFE_BUT_LINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_OTHER_UNSAFE}]")


def for_terminal(text: object) -> str:
    """``text`` on one line, with every control or reordering character written as a visible escape."""
    return _UNSAFE.sub(_escape, str(text))


def for_terminal_lines(text: str) -> str:
    """Like :func:`for_terminal`, but keeps newlines and tabs (for answers and other multi-line text)."""
    return _UNSAFE_BUT_LINES.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0A:
        return "\\n"
    if code == 0x0D:
        return "\\r"
    if code == 0x09:
        return "\\t"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


class TerminalLogFormatter(logging.Formatter):
    """Log lines for a terminal: the message (which may quote a file name) is escaped; tracebacks are kept."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = for_terminal(record.message)
        return super().formatMessage(record)
