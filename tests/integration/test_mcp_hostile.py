"""MCP servers that misbehave (tests/mcp/hostile_server.py, written with the official SDK) are survived with a clear
reason, quickly, and their processes are gone afterwards: 10,000 tools, a 100 MB result, a crash in the middle of a
call, a call that never answers, answers that are not MCP, and banner lines printed on the server's output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.tools.mcp_link import MAX_LISTED_TOOLS, ToolServerError, call_tool, list_tools
from app.tools.servers import http_entry, stdio_entry
from app.tools.toolbox import MAX_RESULT_BYTES, ToolBox, server_tools
from backends.base import ToolCall
from tests.integration.test_mcp_command import free_port, wait_for_port

pytestmark = pytest.mark.integration


def hostile(mode: str, pidfile: Path | None = None):  # type: ignore[no-untyped-def]
    extra = [str(pidfile)] if pidfile is not None else []
    return stdio_entry(f"hostile-{mode}", [sys.executable, "-m", "tests.mcp.hostile_server", mode, *extra])


def gone(pidfile: Path) -> bool:
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_tool_whose_schema_asks_for_a_huge_grammar_is_left_out_and_named_and_the_rest_offered() -> None:
    from tests.helpers import MemoryGuard

    with MemoryGuard(os.getpid(), 500 * 1024 * 1024) as guard:
        offered, problems = server_tools([hostile("greedy"), hostile("plain")], 60)
    assert not guard.killed, f"grew by {guard.grew_bytes:,} bytes"
    tools = {(o.server, o.tool) for o in offered}
    assert ("hostile-greedy", "greedy") not in tools
    assert ("hostile-greedy", "big") in tools and ("hostile-plain", "big") in tools  # the rest, of both servers
    (problem,) = problems
    assert problem.startswith("hostile-greedy: its tool 'greedy' is left out.")
    assert "minLength 1,000,000,000 is above 2,000 (at properties.text.minLength)" in problem


def test_ten_thousand_tools_are_read_and_only_the_first_ones_offered() -> None:
    listed = list_tools(hostile("many"), 120)
    assert listed.total == 10_006 and len(listed.tools) == MAX_LISTED_TOOLS
    assert listed.tools[0].name == "tool_00000"


def test_a_100_mb_result_is_refused_once_it_passes_the_limit(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    with pytest.raises(ToolServerError, match="sent a message larger than 16 MB; Hearth reads at most 16 MB"):
        call_tool(hostile("plain", pidfile), "huge", {}, 120)
    assert gone(pidfile)


def test_a_server_that_ends_mid_call_or_never_answers_is_reported_and_stopped(tmp_path: Path) -> None:
    with pytest.raises(ToolServerError, match=r"it stopped \(exit code 7\) before it answered"):
        call_tool(hostile("plain"), "crash", {}, 60)
    pidfile = tmp_path / "pid"
    with pytest.raises(ToolServerError, match="did not answer within 3 s"):
        call_tool(hostile("plain", pidfile), "hang", {}, 3)
    assert gone(pidfile)


def test_answers_that_are_not_mcp_end_the_use_at_once_and_banner_lines_are_passed_over(tmp_path: Path) -> None:
    with pytest.raises(ToolServerError, match="answered with something that is not an MCP message") as caught:
        list_tools(hostile("garbage"), 60)
    assert "not an MCP result" in caught.value.message
    listed = list_tools(hostile("banner"), 60)
    assert {t.name for t in listed.tools} == {"huge", "big", "environment", "crash", "hang", "count"}


def test_a_large_result_reaches_the_model_cut_with_a_note_and_a_failure_as_text() -> None:
    offered, problems = server_tools([hostile("plain")], 60)
    assert not problems
    box = ToolBox(tuple(offered))
    text, failed = box.run(ToolCall("call_1", "hostile-plain__big", "{}"))
    assert not failed and len(text.encode()) < MAX_RESULT_BYTES + 200
    assert text.endswith(f"[Hearth cut this result at {MAX_RESULT_BYTES // 1024} KB of 1,000,000 bytes.]")
    text, failed = box.run(ToolCall("call_2", "hostile-plain__crash", "{}"))
    assert failed and "stopped (exit code 7)" in text


def test_a_server_gets_a_short_safe_environment_without_hearths_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEARTH_API_KEY", "hearth-secret-key")
    monkeypatch.setenv("HEARTH_HOME", "/tmp/somewhere")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-for-tools")
    entry = stdio_entry("envs", [sys.executable, "-m", "tests.mcp.hostile_server", "plain"], {"NOTES_DIR": "/notes"})
    names = set(call_tool(entry, "environment", {}, 60).text.split())
    assert "NOTES_DIR" in names and "PATH" in names
    assert not {n for n in names if n.startswith("HEARTH_")} and "AWS_SECRET_ACCESS_KEY" not in names


@pytest.mark.parametrize("kind", ["sse", "json"])
def test_a_100_mb_answer_over_http_is_refused_past_the_limit(kind: str, tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tests.mcp.hostile_server", f"http-{kind}-{port}"])
    try:
        wait_for_port(port, server)
        entry = http_entry(f"far-{kind}", f"http://127.0.0.1:{port}/mcp")
        assert {t.name for t in list_tools(entry, 60).tools} >= {"huge", "big"}
        with pytest.raises(ToolServerError, match="larger than 16 MB; Hearth reads at most 16 MB"):
            call_tool(entry, "huge", {}, 120)
        assert len(call_tool(entry, "big", {}, 60).text) == 1_000_000  # under the limit: read whole
    finally:
        server.terminate()
        server.wait(timeout=15)


def test_ctrl_c_in_the_middle_of_a_call_ends_it_and_the_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = (
        "import signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # a test runner may start it with SIGINT ignored
        "from app.tools.mcp_link import call_tool\n"
        "from app.tools.servers import stdio_entry\n"
        f"entry = stdio_entry('h', [sys.executable, '-m', 'tests.mcp.hostile_server', 'plain', {str(pidfile)!r}])\n"
        "try:\n"
        "    call_tool(entry, 'hang', {}, 600)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for _ in range(300):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.1)
    time.sleep(1)  # the call is under way
    caller.send_signal(signal.SIGINT)
    out, _ = caller.communicate(timeout=120)  # far less than the call's 600 s limit
    assert out.strip() == "interrupted"
    assert gone(pidfile)
