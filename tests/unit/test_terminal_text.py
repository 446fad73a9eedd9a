"""Names from outside are printed with their control characters visible, never obeyed by the terminal."""

import io
import logging

import pytest

from app.terminal_text import TerminalLogFormatter, for_terminal, for_terminal_lines


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("evil\x1b[2J\nname.txt", "evil\\x1b[2J\\nname.txt"),  # clear screen, then a fake line
        ("a\rb\tc\x00d\x7fe\x9bf", "a\\rb\\tc\\x00d\\x7fe\\x9bf"),  # CR, tab, NUL, DEL, C1 CSI
        ("invoice\u202etxt.exe", "invoice\\u202etxt.exe"),  # right-to-left override
        ("\u2066x\u2069 and \u2028", "\\u2066x\\u2069 and \\u2028"),  # isolates, line separator
        ("bad\udcffbytes.txt", "bad\\udcffbytes.txt"),  # an undecodable byte in a file name
        ("café – 日本語 😀.md", "café – 日本語 😀.md"),  # ordinary text passes unchanged
    ],
)
def test_control_characters_are_shown_not_obeyed(raw: str, shown: str) -> None:
    assert for_terminal(raw) == shown
    shown.encode("utf-8")  # printable in any UTF-8 terminal: no lone surrogates left


def test_multi_line_text_keeps_its_lines_but_not_its_escapes() -> None:
    assert for_terminal_lines("one\n\ttwo\x1b[31m\r") == "one\n\ttwo\\x1b[31m\\r"


def test_log_lines_escape_the_message() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TerminalLogFormatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("tests.terminal_text")
    logger.addHandler(handler)
    try:
        logger.warning("skipped %s", "evil\x1b[2J\nname.txt")
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == "WARNING skipped evil\\x1b[2J\\nname.txt\n"
