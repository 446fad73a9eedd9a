"""MCP servers are kept running between uses (app/tools/server_pool.py), tried with a real SDK server over stdio
(tests/mcp/hostile_server.py): two calls reach one process, which keeps its state; a server that crashed is started
again at the next call; Stop gives up a call that hangs at once and ends its server; an unused session is ended
after its idle time; and every server is ended when the process that started it ends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.tools.mcp_link import ToolCallCancelled, ToolServerError, _client, call_tool, list_tools
from app.tools.server_pool import ServerPool, shared_pool
from backends.base import CancelToken
from tests.integration.test_mcp_hostile import gone, hostile

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def fresh_sessions() -> Iterator[None]:
    """Each test's servers are ended after it (the pool opens again at the next use)."""
    yield
    shared_pool(_client).close()


def counted(pidfile: Path) -> tuple[int, int]:
    calls, pid = call_tool(hostile("plain", pidfile), "count", {}, 60).text.split()
    return int(calls), int(pid)


def test_one_server_process_serves_every_call_and_keeps_its_state(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    assert "count" in {t.name for t in list_tools(hostile("plain", pidfile), 60).tools}
    first = counted(pidfile)
    second = counted(pidfile)
    assert first[1] == second[1] == int(pidfile.read_text())  # the process that listed the tools, still
    assert (first[0], second[0]) == (1, 2)  # its state kept between calls
    os.kill(first[1], 0)  # alive between uses


def test_a_server_that_crashed_is_started_again_at_the_next_call(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    _, before = counted(pidfile)
    with pytest.raises(ToolServerError, match=r"it stopped \(exit code 7\) before it answered"):
        call_tool(hostile("plain", pidfile), "crash", {}, 60)
    calls, after = counted(pidfile)
    assert after != before and calls == 1  # a fresh process


def test_stop_gives_up_a_hanging_call_at_once_and_ends_its_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    counted(pidfile)
    cancel = CancelToken()
    threading.Timer(1.0, cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(ToolCallCancelled):
        call_tool(hostile("plain", pidfile), "hang", {}, 600, cancel)
    assert time.monotonic() - started < 60  # far less than the call's 600 s limit
    assert gone(pidfile)
    assert counted(pidfile)[0] == 1  # the next call starts it again


def test_a_session_unused_for_its_idle_time_is_ended(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    pool = ServerPool(_client, idle_close_s=1.0)
    try:
        entry = hostile("plain", pidfile)
        pool.use(entry, 60, lambda client: client.list_tools())
        assert pool.running() == [entry]
        assert gone(pidfile)  # waits up to 5 s
        # The session is marked ended once its client has closed, just after the server's process is gone.
        deadline = time.monotonic() + 5
        while pool.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.running() == []
    finally:
        pool.close()


def test_every_server_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = (
        "import sys\n"
        "from app.tools.mcp_link import call_tool\n"
        "from app.tools.servers import stdio_entry\n"
        f"entry = stdio_entry('h', [sys.executable, '-m', 'tests.mcp.hostile_server', 'plain', {str(pidfile)!r}])\n"
        "print(call_tool(entry, 'count', {}, 60).text)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "1"
    assert gone(pidfile)


def test_a_server_removed_or_switched_off_is_ended_at_the_next_listing(tmp_path: Path) -> None:
    import dataclasses

    from app.tools.toolbox import server_tools

    pidfile = tmp_path / "pid"
    entry = hostile("plain", pidfile)
    offered, problems = server_tools([entry], 60)
    assert not problems and "hostile-plain__count" in {o.spec.name for o in offered}
    os.kill(int(pidfile.read_text()), 0)  # kept running after the listing
    server_tools([dataclasses.replace(entry, enabled=False)], 60)  # switched off
    assert gone(pidfile)
