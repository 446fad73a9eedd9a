"""The real engine process with the real llama.cpp and the embedded model: a SIGKILL in the middle of an answer
leaves the caller with a clear error and the partial answer saved, the engine comes back by itself, a switch
waits for (or cancels) the answers in flight, and nothing is left running afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.answering.chat import TurnEvent, TurnSaved, TurnStarted
from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services, build_services
from app.settings import load_settings
from backends.base import CancelToken, ChatMessage, Finished, GenerationParams, TextDelta
from models.shared.errors import EngineStopped

pytestmark = pytest.mark.integration

# Long enough that the answer is still being written when the test acts on it.
LONG = GenerationParams(temperature=0.7, max_new_tokens=400, seed=3)
STORY = "Write a long story about a lighthouse keeper and the sea, with many details."
WAIT_S = 120.0


@pytest.fixture
def services(embedded_model: Path, llama_cpp_installed: None) -> Iterator[Services]:
    services = build_services(load_settings(model={"context_length": 2048}, backend={"name": "llamacpp"}))
    list(services.control.start())
    yield services
    services.close()


def wait_for(condition: object, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for every purpose that matters here.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def texts(events: list[TurnEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_the_model_runs_in_its_own_process(services: Services) -> None:
    pid = services.runtime.status.engine_pid
    assert pid is not None and pid != os.getpid() and alive(pid)
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"backends.engine" in cmdline
    events = list(services.chat.send(None, "Say hello.", TurnSettings(GenerationParams(0.0, 12), "You are brief.")))
    assert texts(events)
    assert isinstance(events[-1], TurnSaved)


def test_sigkill_mid_answer_keeps_what_was_written_and_the_engine_comes_back(services: Services) -> None:
    first_pid = services.runtime.status.engine_pid
    assert first_pid is not None
    seen: list[TurnEvent] = []
    with pytest.raises(EngineStopped) as caught:
        for event in services.chat.send(None, STORY, TurnSettings(LONG, "You are a storyteller.")):
            seen.append(event)
            if sum(isinstance(e, TextDelta) for e in seen) == 20:
                os.kill(first_pid, signal.SIGKILL)
    assert "stopped unexpectedly" in caught.value.message and "SIGKILL" in caught.value.message
    assert "restarting" in caught.value.message
    written = texts(seen)
    assert written
    started = seen[0]
    assert isinstance(started, TurnStarted)
    stored = services.store.get(started.conversation_id).messages
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].content == written  # every token the caller saw, and nothing else
    assert stored[-1].stats is not None and stored[-1].stats.finish_reason == "error"

    wait_for(lambda: services.runtime.status.state == "ready", "the engine to restart")
    second_pid = services.runtime.status.engine_pid
    assert second_pid not in (None, first_pid)
    assert not alive(first_pid)
    follow_up = list(
        services.chat.send(started.conversation_id, "And then?", TurnSettings(GenerationParams(0.0, 16), "sys"))
    )
    assert texts(follow_up) and isinstance(follow_up[-1], TurnSaved)


def answer_in_background(services: Services, params: GenerationParams) -> tuple[threading.Thread, list[object]]:
    """A chat answer written on another thread; returns once its first words have arrived."""
    events: list[object] = []
    streaming = threading.Event()

    def answer() -> None:
        for event in services.chat.send(None, STORY, TurnSettings(params, "sys")):
            events.append(event)
            if isinstance(event, TextDelta):
                streaming.set()

    writer = threading.Thread(target=answer)
    writer.start()
    assert streaming.wait(WAIT_S)
    return writer, events


def test_a_switch_waits_for_the_answer_in_flight(services: Services) -> None:
    writer, events = answer_in_background(services, GenerationParams(0.0, 120))
    old_pid = services.runtime.status.engine_pid
    progress = [p.message for p in services.control.set_context(1024)]
    writer.join(WAIT_S)
    finished = next(e for e in events if isinstance(e, Finished))
    assert finished.reason in ("stop", "length")  # the answer was never cut short
    assert any(m.startswith("Waiting for 1 answer") for m in progress)
    status = services.runtime.status
    assert status.state == "ready" and status.plan is not None and status.plan.context_length == 1024
    assert status.engine_pid != old_pid and old_pid is not None and not alive(old_pid)


def test_a_switch_can_cancel_the_answer_in_flight_and_the_old_model_serves_meanwhile(services: Services) -> None:
    writer, events = answer_in_background(services, LONG)
    old_pid = services.runtime.status.engine_pid
    switch = services.control.set_context(1024, cancel_running=True)
    next(switch)  # planned
    next(switch)  # the new engine is loading beside the old one (there is memory for both here)
    with services.runtime.lease() as lease:  # which still takes new questions
        assert lease.context_length == 2048
        assert services.runtime.status.pending
    list(switch)
    writer.join(WAIT_S)
    finished = next(e for e in events if isinstance(e, Finished))
    assert finished.reason == "cancelled"
    saved = events[-1]
    assert isinstance(saved, TurnSaved) and saved.message.stats is not None
    assert saved.message.stats.finish_reason == "cancelled"
    status = services.runtime.status
    assert status.state == "ready" and status.plan is not None and status.plan.context_length == 1024
    assert old_pid is not None and not alive(old_pid)


def test_parallel_leases_each_get_their_own_answer(services: Services) -> None:
    questions = {"apples": "Say the word apples.", "boats": "Say the word boats."}
    answers: dict[str, str] = {}

    def ask(key: str) -> None:
        with services.runtime.lease() as engine:
            events = engine.stream_chat([ChatMessage("user", questions[key])], GenerationParams(0.0, 24), CancelToken())
            answers[key] = "".join(e.text for e in events if isinstance(e, TextDelta))

    threads = [threading.Thread(target=ask, args=(key,)) for key in questions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    for key, question in questions.items():
        with services.runtime.lease() as engine:
            alone = engine.stream_chat([ChatMessage("user", question)], GenerationParams(0.0, 24), CancelToken())
            assert answers[key] == "".join(e.text for e in alone if isinstance(e, TextDelta))


def test_closing_leaves_no_engine_process(embedded_model: Path, llama_cpp_installed: None) -> None:
    services = build_services(load_settings(backend={"name": "llamacpp"}))
    list(services.control.start())
    pid = services.runtime.status.engine_pid
    assert pid is not None and alive(pid)
    services.close()
    assert not alive(pid)


def test_the_engine_ends_when_the_web_process_is_killed(embedded_model: Path, tmp_path: Path) -> None:
    """A SIGKILLed Hearth cannot clean up; its engine must notice and go by itself (no orphans)."""
    pid_file = tmp_path / "engine.pid"
    script = (
        "import os, signal\n"
        "from app.services.container import build_services\n"
        "from app.settings import load_settings\n"
        "services = build_services(load_settings(backend={'name': 'llamacpp'}))\n"
        "list(services.control.start())\n"
        f"open({str(pid_file)!r}, 'w').write(str(services.runtime.status.engine_pid))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = dict(os.environ, HEARTH_HOME=str(tmp_path / "home"))
    result = subprocess.run([sys.executable, "-c", script], env=env, timeout=WAIT_S, capture_output=True)
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()
    engine_pid = int(pid_file.read_text())
    wait_for(lambda: not alive(engine_pid), "the orphaned engine to exit", timeout_s=30)
