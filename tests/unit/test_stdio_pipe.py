"""Reading an MCP server's output (app/tools/stdio_pipe.py): lines split as they come, a message over the limit
refused before its end, and plain text passed over a few times where JSON that is not MCP is not."""

from __future__ import annotations

import pytest

from app.tools.stdio_pipe import MAX_STRAY_LINES, LineReader, ServerMisbehaved, line_problem


def test_lines_are_split_across_chunks_and_a_long_one_is_refused_before_it_ends() -> None:
    reader = LineReader(limit=64)
    assert reader.feed(b'{"a": 1}\n{"b"') == [b'{"a": 1}']
    assert reader.feed(b": 2}\n\n") == [b'{"b": 2}', b""]
    assert reader.feed(b"x" * 60) == []
    with pytest.raises(ServerMisbehaved, match="larger than 0 MB"):
        reader.feed(b"x" * 10)


def test_a_banner_is_passed_over_a_few_times_and_json_that_is_not_mcp_is_not() -> None:
    assert line_problem(b"Server ready", 0) is None
    assert line_problem(b"   ", MAX_STRAY_LINES) is None
    stray = line_problem(b"Server ready", MAX_STRAY_LINES)
    assert stray is not None and "lines that are not MCP messages" in stray and "'Server ready'" in stray
    wrong = line_problem(b'{"jsonrpc": "2.0", "id": 1, "result": 5}', 0)
    assert wrong is not None and wrong.startswith("it answered with something that is not an MCP message")
