"""A model load that never finishes (a real engine process, stopped with SIGSTOP the moment it starts) does not
brick chat: the model serving before keeps answering, the page's Cancel ends the load, and after a restart Hearth
comes back with the model that worked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import psutil
import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, send
from tests.e2e.test_models_page import pick
from tests.helpers import GEMMA3_270M, assembled_model

pytestmark = pytest.mark.e2e


def engine_pids(app: RunningApp) -> set[int]:
    pids: set[int] = set()
    for child in psutil.Process(app.process.pid).children():
        try:
            if "backends.engine" in " ".join(child.cmdline()):
                pids.add(child.pid)
        except psutil.NoSuchProcess:  # a short-lived child (a probe) ended between the listing and the reading
            continue
    return pids


class EngineFreezer:
    """Stops every engine process that starts after it does (SIGSTOP), as a load stuck for good would be."""

    def __init__(self, app: RunningApp) -> None:
        self.app = app
        self.known = engine_pids(app)
        self.frozen: list[int] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            for pid in engine_pids(self.app) - self.known:
                os.kill(pid, signal.SIGSTOP)
                self.known.add(pid)
                self.frozen.append(pid)
            time.sleep(0.002)  # an engine takes far longer than this to start Python and load a model

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)


def import_model(app: RunningApp, path: str) -> None:
    env = os.environ | {"HEARTH_HOME": str(app.home)}
    subprocess.run([sys.executable, "-m", "app", "models", "import", path], env=env, check=True, capture_output=True)


def test_cancel_ends_a_stuck_load_and_the_previous_model_keeps_serving(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_GENERATION__MAX_NEW_TOKENS", "24")  # short answers: this test is about who answers
    gemma = assembled_model(GEMMA3_270M)
    app = start_app()
    import_model(app, str(gemma))
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    serving = engine_pids(app)
    assert len(serving) == 1

    freezer = EngineFreezer(app)
    try:
        page.get_by_role("tab", name="Models").click()
        page.locator("#models-table [role=gridcell]", has_text="gemma").first.wait_for(timeout=30_000)
        pick(page, "gemma")
        page.click("#use-model")
        page.locator("#status-line", has_text="answers until it is ready").wait_for(timeout=30_000)
        assert freezer.frozen, "the new engine was not seen starting"

        # The model that was serving still answers while the other one is stuck.
        page.get_by_role("tab", name="Chat").click()
        send(page, "Name a colour.")
        page.locator("#chat [data-testid='bot']").last.filter(has_text="tokens/s").wait_for(timeout=120_000)
        assert "SmolLM2" in page.inner_text("#status-line")

        page.locator("#cancel-load").click()  # the way out, beside the status line
        page.get_by_role("tab", name="Models").click()
        page.locator("#job-progress", has_text="was cancelled").wait_for(timeout=60_000)
        assert "Chat still uses SmolLM2" in page.inner_text("#job-progress")
    finally:
        freezer.stop()
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in freezer.frozen)
    assert engine_pids(app) == serving  # the stuck engine is gone; the serving one was never touched
    page.get_by_role("tab", name="Chat").click()
    page.locator("#cancel-load").wait_for(state="hidden", timeout=10_000)
    send(page, "Name a fruit.")
    page.locator("#chat [data-testid='bot']").last.filter(has_text="tokens/s").wait_for(timeout=120_000)

    # The model that never answered did not become the default: a restart comes back to the one that worked.
    app.stop()
    again = start_app(home=app.home)
    page = open_page(again)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    assert "SmolLM2" in page.inner_text("#status-line")
    assert again.remote_requests == [] and app.remote_requests == []


def test_hearth_use_cancel_load_ends_a_stuck_switch_from_the_command_line(
    start_app: Callable[..., RunningApp],
) -> None:
    from tests.e2e.test_api_clients import hearth
    from tests.e2e.test_runtime_api import api_key, auth, ready

    gemma = assembled_model(GEMMA3_270M)
    app = start_app()
    import_model(app, str(gemma))
    key = api_key(app)
    before = ready(app, key)
    freezer = EngineFreezer(app)
    env = os.environ | {"HEARTH_HOME": str(app.home)}
    switching = subprocess.Popen(
        [sys.executable, "-m", "app", "use", gemma.name],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not freezer.frozen:
            assert time.monotonic() < deadline, "the new engine was not seen starting"
            time.sleep(0.05)
        status = httpx.get(f"{app.url}v1/hearth/status", headers=auth(key), timeout=10).json()
        assert status["state"] == "ready" and status["model"] == before["model"]
        assert "answers until it is ready" in status["loading_beside"]
        cancelled = hearth(["use", "--cancel-load"], app.home, timeout=60)
        assert cancelled.returncode == 0, cancelled.stderr
        assert "Cancelled the load" in cancelled.stdout
        out, err = switching.communicate(timeout=60)
    finally:
        freezer.stop()
        if switching.poll() is None:
            switching.kill()
    assert switching.returncode == 1, out + err
    assert "was cancelled" in err and "Traceback" not in err
    after = ready(app, key)
    assert after["model"] == before["model"] and after["engine_pid"] == before["engine_pid"]
    reply = httpx.post(
        f"{app.url}v1/chat/completions",
        json={"model": "hearth", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
        headers=auth(key),
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    nothing = hearth(["use", "--cancel-load"], app.home, timeout=60)
    assert nothing.returncode == 0 and "No model was loading" in nothing.stdout
