"""Hearth promises to make no network connections: watch every connect() of a real `hearth ui` while it starts,
serves the page and answers a question."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import free_port
from tests.helpers import require

pytestmark = pytest.mark.e2e

CONNECT = re.compile(
    r"connect\(\d+, \{sa_family=(AF_INET6?), (?:sin6?_port=htons\((\d+)\), )?[^}]*?"
    r"(?:inet_addr\(\"([^\"]+)\"\)|inet_pton\(AF_INET6, \"([^\"]+)\")"
)
LOOPBACK = ("127.", "::1", "::ffff:127.")


def outbound(trace: str) -> list[str]:
    found = []
    for match in CONNECT.finditer(trace):
        address = match.group(3) or match.group(4) or ""
        if not address.startswith(LOOPBACK):
            found.append(match.group(0))
    return found


def test_the_connect_filter_sees_outbound_attempts() -> None:
    sample = (
        '12 connect(16, {sa_family=AF_INET, sin_port=htons(7890), sin_addr=inet_addr("127.0.0.1")}, 16) = 0\n'
        '12 connect(17, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("142.250.1.1")}, 16) = -1\n'
        "12 connect(18, {sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), "
        'inet_pton(AF_INET6, "2001:4860::8888", &sin6_addr), sin6_scope_id=0}, 28) = -1\n'
    )
    assert len(outbound(sample)) == 2


def ask_once_loaded(client: Any, deadline: float) -> Any:
    """The first answer, asked again while the model is still loading (slow under strace)."""
    from gradio_client.exceptions import AppError

    while True:
        try:
            # The message box takes text and files: {"text": ..., "files": [...]}.
            message = {"text": "Say hello.", "files": []}
            return client.predict(message, "Be brief.", 0.0, 16, api_name="/send")[0]
        except AppError as exc:
            if "still loading" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_the_app_connects_to_nothing_but_itself(isolated_home: Path, tmp_path: Path, embedded_model: Path) -> None:
    strace = shutil.which("strace")
    require(strace is not None, "strace", "apt-get install -y strace")
    assert strace is not None
    from gradio_client import Client

    port = free_port()
    trace = tmp_path / "connect.trace"
    log = tmp_path / "ui.log"
    # Run the app as a user would: libraries behave differently under CI (OpenVINO's telemetry stays quiet when
    # CI=true, which once hid an event it sent everywhere else).
    ci_markers = ("CI", "TF_BUILD", "JENKINS_URL", "GITHUB_ACTIONS", "GITLAB_CI")
    env = {k: v for k, v in os.environ.items() if k not in ci_markers} | {"HEARTH_HOME": str(isolated_home)}
    process = subprocess.Popen(
        [
            strace,
            "-f",
            "-qq",
            "-e",
            "trace=connect,bind",
            "-o",
            str(trace),
            sys.executable,
            "-m",
            "app",
            "ui",
            "--port",
            str(port),
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while "Hearth is running at" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        printed = re.search(r"Hearth is running at \S+\?token=(\S+)", log.read_text())
        assert printed is not None, log.read_text()
        cookie = f"hearth-page-{port}={printed.group(1)}"  # what the owner's browser holds
        client = Client(f"http://127.0.0.1:{port}/", verbose=False, headers={"Cookie": cookie})
        chat = ask_once_loaded(client, deadline)
        assert chat[-1]["role"] == "assistant"
    finally:
        import psutil

        for child in psutil.Process(process.pid).children(recursive=True):
            child.terminate()  # strace exits when the app it traces does
        process.wait(timeout=30)
    text = trace.read_text()
    assert f"htons({port})" in text  # the trace works: it saw the app bind its own port
    assert outbound(text) == [], "Hearth tried to reach another machine"
