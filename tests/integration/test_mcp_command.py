"""`hearth mcp` against a real MCP server written with the official SDK (tests/mcp/demo_server.py): started over
stdio, and over Streamable HTTP on loopback with a bearer token; a server that fails is reported with the last
line it printed; the token is never shown; the file that keeps it is out of another account's reach."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.tools.consent import ConsentBook
from tests.helpers import free_port
from tests.integration.test_cli import hearth

pytestmark = pytest.mark.integration

SERVER = [sys.executable, "-m", "tests.mcp.demo_server"]
TOKEN = "hearth-test-token-7f3a9c"


def test_a_stdio_server_is_added_listed_switched_off_and_removed(isolated_home: Path) -> None:
    added = hearth("mcp", "add", "demo", "--", *SERVER, home=isolated_home)
    assert added.returncode == 0, added.stderr
    assert "Added the MCP server demo" in added.stdout
    assert "demo\ton\t" in added.stdout and "2 tools" in added.stdout
    assert "  add: Add two whole numbers." in added.stdout
    assert "  lighthouse_keeper: Who keeps the named lighthouse." in added.stdout
    off = hearth("mcp", "disable", "demo", home=isolated_home)
    assert "is off" in off.stdout
    listed = hearth("mcp", "list", home=isolated_home)
    assert "demo\toff\t" in listed.stdout and "hearth mcp enable demo" in listed.stdout
    assert "2 tools" not in listed.stdout  # a server switched off is not started
    gone = hearth("mcp", "remove", "demo", home=isolated_home)
    assert gone.returncode == 0 and "Removed the MCP server demo" in gone.stdout
    assert "No MCP servers are added" in hearth("mcp", "list", home=isolated_home).stdout


def test_a_server_that_fails_is_reported_with_what_it_printed(isolated_home: Path) -> None:
    failing = ["sh", "-c", "echo 'starting'; echo 'cannot open /etc/notes.toml' >&2; exit 3"]
    added = hearth("mcp", "add", "broken", "--", *failing, home=isolated_home)
    assert added.returncode == 0, added.stderr  # kept, so it can be fixed and tried again
    assert "broken\ton\t" in added.stdout and "not working" in added.stdout
    assert "It printed: cannot open /etc/notes.toml" in added.stdout
    missing = hearth("mcp", "add", "missing", "--", "/nonexistent/mcp-server", home=isolated_home)
    assert "its command was not found" in missing.stdout
    refused = hearth("mcp", "add", "bad name", "--", "true", home=isolated_home)
    assert refused.returncode != 0 and "cannot name an MCP server" in refused.stderr


def wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    """Until something listens on ``port`` of loopback; fails if ``process`` ends first or it takes too long."""
    deadline = time.monotonic() + seconds
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert process.poll() is None and time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.2)


@pytest.fixture
def http_server() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([*SERVER, "--http", str(port), "--token", TOKEN], stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_an_http_server_with_a_token_file_and_the_token_never_shown(
    isolated_home: Path, http_server: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    added = hearth("mcp", "add", "web", "--url", http_server, "--token-file", str(token_file), home=isolated_home)
    assert added.returncode == 0, added.stderr
    assert f"web\ton\t{http_server} (with a token)\t2 tools" in added.stdout
    token_file.write_text("not-the-token\n")
    wrong = hearth("mcp", "add", "web2", "--url", http_server, "--token-file", str(token_file), home=isolated_home)
    assert "web2\ton\t" in wrong.stdout and "not working" in wrong.stdout
    unauthenticated = hearth("mcp", "add", "web3", "--url", http_server, home=isolated_home)
    assert "not working" in unauthenticated.stdout
    listed = hearth("mcp", "list", home=isolated_home)
    for output in (added, wrong, unauthenticated, listed):
        assert TOKEN not in output.stdout + output.stderr and "not-the-token" not in output.stdout + output.stderr
    kept = json.loads((isolated_home / "mcp-servers.json").read_text())
    assert [s["token"] for s in kept["servers"]] == [TOKEN, "not-the-token", ""]


def test_servers_are_imported_from_another_apps_file(isolated_home: Path, tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"demo": {"command": SERVER[0], "args": SERVER[1:]}}}))
    imported = hearth("mcp", "import", str(config), home=isolated_home)
    assert imported.returncode == 0, imported.stderr
    assert "Imported 1 MCP server: demo" in imported.stdout
    assert "demo\ton\t" in hearth("mcp", "list", home=isolated_home).stdout


def test_another_account_cannot_read_the_servers_or_their_tokens(
    tmp_path: Path, other_account: tuple[int, int]
) -> None:
    """With every folder above the data folder open to others (as a home folder often is), the data folder and the
    servers' file keep their tokens from another account."""
    shared = Path(tempfile.mkdtemp(prefix="hearth-mcp-", dir="/tmp"))
    shared.chmod(0o755)
    home = shared / "home"
    try:
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN)
        url = "http://127.0.0.1:9/mcp"
        added = hearth("mcp", "add", "web", "--url", url, "--token-file", str(token_file), home=home)
        assert added.returncode == 0, added.stderr
        uid, gid = other_account
        as_other = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        assert subprocess.run([*as_other, "ls", str(shared)], capture_output=True).returncode == 0  # reachable
        # What the Tools tab writes too: the tools allowed for good, kept the same way.
        ConsentBook(home / "tool-consent.json").allow("web", "search")
        assert (home / "tool-consent.json").stat().st_mode & 0o077 == 0
        consent = ["cat", str(home / "tool-consent.json")]
        for command in (["cat", str(home / "mcp-servers.json")], consent, ["ls", str(home)]):
            attempt = subprocess.run([*as_other, *command], capture_output=True, text=True)
            assert attempt.returncode != 0 and "Permission denied" in attempt.stderr, command
            assert TOKEN not in attempt.stdout
    finally:
        shutil.rmtree(shared)


def test_hearth_chat_offers_the_tools_and_runs_none_without_consent(isolated_home: Path, embedded_model: Path) -> None:
    """No terminal to ask on: every call the model makes is refused; the tools offered are those of the calculator
    and the running MCP server's that fit the request; one that fails with escape codes in what it printed is named
    with them made visible, never run by the terminal."""
    assert hearth("mcp", "add", "demo", "--", *SERVER, home=isolated_home).returncode == 0
    rude = ["sh", "-c", r"printf '\033]0;owned\007\033[2Jgone\n' >&2; exit 3"]
    assert hearth("mcp", "add", "rude", "--", *rude, home=isolated_home).returncode == 0
    asked = [
        "chat",
        "--tools",
        "--temperature",
        "0",
        "--max-tokens",
        "60",
        "Use the add tool to add 2 and 3.",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "app", *asked],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HEARTH_HOME": str(isolated_home)},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "[tools offered: calculator, demo__add]" in result.stderr  # the lighthouse keeper does not fit
    assert "not offered: demo__lighthouse_keeper]" in result.stderr
    assert "[result]" not in result.stderr  # nothing ran
    calls = result.stderr.count("[tool call]")
    assert result.stderr.count("[refused] The user did not allow this call.") == calls
    assert "Traceback" not in result.stderr
    assert "[tools] " in result.stderr and "\\x1b]0;owned\\x07\\x1b[2Jgone" in result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
