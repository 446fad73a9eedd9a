"""Real GGUF files with hostile chat templates (the embedded model, its template replaced), loaded by the real
llama.cpp backend in the real engine process: each loads, falls back to ChatML with a note, and answers; a
template that misbehaves only at a later turn is refused at that turn, which is answered in ChatML, and the
note appears from then on; no render keeps Stop or other requests waiting; no renderer process outlives its
engine. The pytest timeouts are the "instead of hanging" bounds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.answering.chat import TurnSaved, TurnStarted
from app.services.answering.turn_settings import TurnSettings
from app.services.container import build_services
from app.settings import load_settings
from backends.base import CancelToken, ChatEvent, ChatMessage, Finished, GenerationParams, LoadOptions, TextDelta
from backends.engine.client import EngineProcess
from models.gguf import read_model_info
from tests.helpers import copy_gguf_with_chat_template
from tests.integration.test_engine_process import alive, wait_for

pytestmark = pytest.mark.integration

NOTE = "Using the ChatML prompt format because its chat template was refused: "
NESTED_LOOP = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
SHORT = GenerationParams(temperature=0.0, max_new_tokens=6)
# One thread: llama.cpp with as many threads as cores slows down tenfold when anything else wants the CPU.
OPTIONS = LoadOptions(context_length=1024, threads=1, seed=1)
WAIT_S = 60.0


@pytest.fixture(scope="module")
def smol_template(embedded_model: Path, llama_cpp_installed: None) -> str:
    template = read_model_info(embedded_model).chat_template
    assert template
    return template


def hostile_model(source: Path, folder: Path, template: str) -> Path:
    path = copy_gguf_with_chat_template(source, folder / "hostile.gguf", template)
    assert read_model_info(path).chat_template == template
    return path


@pytest.fixture
def start_engine() -> Iterator[list[EngineProcess]]:
    engines: list[EngineProcess] = []
    yield engines
    for engine in engines:
        engine.close()


def started(engines: list[EngineProcess], path: Path) -> EngineProcess:
    engine = EngineProcess("llamacpp", read_model_info(path), OPTIONS)
    engines.append(engine)
    list(engine.start())
    return engine


def answer(engine: EngineProcess, messages: list[ChatMessage], cancel: CancelToken | None = None) -> list[ChatEvent]:
    return list(engine.stream_chat(messages, SHORT, cancel or CancelToken()))


def text_of(events: list[ChatEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def conversation(count: int) -> list[ChatMessage]:
    return [ChatMessage(("user", "assistant")[i % 2], f"Say the number {i}.") for i in range(count)]


def renderers_of(pid: int) -> list[int]:
    """The template renderer processes ``pid`` started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if int(parent) == pid and b"template_worker.py" in cmdline:
            found.append(int(entry.name))
    return found


# SMOL stands for the model's own template: each hostile one would otherwise render a good prompt.
HOSTILE = {
    "division by zero": ("{{ 1 / 0 }}SMOL", "ZeroDivisionError: division by zero"),
    "nested range loop": (NESTED_LOOP + "SMOL", "did not finish rendering within 3 s"),
    "huge power": ("{{ 9 ** (9 ** 9) }}SMOL", "did not finish rendering within 3 s"),
    "gigabytes of text": ("{{ 'a' * 10 ** 10 }}SMOL", "needed more than 256 MB of memory"),
    "empty render": ("{% if false %}SMOL{% endif %}", "rendered an empty prompt"),
    "a loop bomb at 7 messages": (
        "{% if messages|length == 7 %}" + NESTED_LOOP + "{% endif %}SMOL",
        "did not finish rendering within 3 s (for 7 messages",
    ),
}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_template_is_refused_at_load_and_the_model_answers_in_chatml(
    kind: str, smol_template: str, embedded_model: Path, tmp_path: Path, start_engine: list[EngineProcess]
) -> None:
    template, reason = HOSTILE[kind]
    engine = started(start_engine, hostile_model(embedded_model, tmp_path, template.replace("SMOL", smol_template)))
    assert len(engine.notes) == 1
    assert engine.notes[0].startswith(NOTE) and reason in engine.notes[0]
    assert engine.pid is not None and renderers_of(engine.pid) == []  # refused: its renderer is gone
    events = answer(engine, [ChatMessage("system", "You are brief."), ChatMessage("user", "Say hello.")])
    assert text_of(events)
    assert isinstance(events[-1], Finished)


@pytest.mark.timeout(300)
def test_a_template_that_fails_at_a_later_turn_is_answered_in_chatml_with_the_note_from_then_on(
    smol_template: str, embedded_model: Path, tmp_path: Path
) -> None:
    """Through the services a person uses: status notes, saved turns. Turn 5 is the first with 10 messages
    (the system prompt, four exchanges, the question), past the 8 the load-time probe renders."""
    bad = "{% if messages|length > 8 %}" + NESTED_LOOP + "{% endif %}"
    path = hostile_model(embedded_model, tmp_path, bad + smol_template)
    services = build_services(
        load_settings(model={"path": path, "context_length": 2048}, backend={"name": "llamacpp", "threads": 1})
    )
    try:
        list(services.control.start())
        assert services.runtime.status.notes == ()
        engine_pid = services.runtime.status.engine_pid
        assert engine_pid is not None and len(renderers_of(engine_pid)) == 1
        conversation_id = None
        for turn in range(1, 7):
            events = list(
                services.chat.send(conversation_id, f"Say the number {turn}.", TurnSettings(SHORT, "You are brief."))
            )
            opened, saved = events[0], events[-1]
            assert isinstance(opened, TurnStarted) and isinstance(saved, TurnSaved) and saved.message.content
            conversation_id = opened.conversation_id
            notes = services.runtime.status.notes
            if turn < 5:
                assert notes == ()
            else:
                assert len(notes) == 1 and notes[0].startswith(NOTE)
                assert "did not finish rendering within 1.5 s (at a turn of 10 messages)" in notes[0]
        assert renderers_of(engine_pid) == []
    finally:
        services.close()


@pytest.mark.timeout(180)
def test_stop_reaches_an_answer_whose_template_hangs(
    smol_template: str, embedded_model: Path, tmp_path: Path, start_engine: list[EngineProcess]
) -> None:
    bad = "{% if messages|length > 8 %}" + NESTED_LOOP + "{% endif %}"
    engine = started(start_engine, hostile_model(embedded_model, tmp_path, bad + smol_template))
    assert engine.notes == ()
    cancel = CancelToken()
    cancel.cancel()  # Stop, pressed while the prompt is still being rendered
    events = answer(engine, conversation(9), cancel)
    assert isinstance(events[-1], Finished) and events[-1].reason == "cancelled"
    assert engine.notes and engine.notes[0].startswith(NOTE)
    assert text_of(answer(engine, conversation(3)))  # the model goes on answering, in ChatML


@pytest.mark.timeout(180)
def test_the_engine_answers_other_requests_while_a_template_hangs(
    smol_template: str, embedded_model: Path, tmp_path: Path, start_engine: list[EngineProcess]
) -> None:
    """A count of a hostile conversation renders on a thread of its own: the engine's request loop, which
    Stop goes through, keeps answering meanwhile."""
    bad = "{% if messages|length > 8 %}" + NESTED_LOOP + "{% endif %}"
    engine = started(start_engine, hostile_model(embedded_model, tmp_path, bad + smol_template))
    counted: list[int] = []
    hostile = threading.Thread(target=lambda: counted.append(engine.count_chat_tokens(conversation(9))))
    hostile.start()
    assert engine.count_tokens("hello there") > 0
    assert hostile.is_alive()  # answered while the hostile render still ran (it takes its whole budget)
    hostile.join(WAIT_S)
    assert counted and counted[0] > 0
    assert engine.notes and "at a turn of 9 messages" in engine.notes[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("busy", [False, True], ids=["idle", "rendering"])
def test_a_renderer_never_outlives_its_killed_parent(busy: bool, tmp_path: Path) -> None:
    """The parent is SIGKILLed (no clean-up runs). An idle renderer sees its pipe close and exits; a busy one
    is ended by the kernel limits armed for its request (its budget plus a second)."""
    pid_file = tmp_path / "renderer.pid"
    template = ("{% if messages|length > 1 %}" + NESTED_LOOP + "{% endif %}") + "{{ messages[0]['content'] }}"
    script = (
        "import os, signal, threading, time\n"
        "from backends.base import ChatMessage\n"
        "from backends.template_renderer import Conversation, TemplateRenderer\n"
        f"renderer = TemplateRenderer({template!r}, '', '', 256 << 20)\n"
        "renderer.render([Conversation((ChatMessage('user', 'hi'),))], [1000], 30.0)\n"
        f"open({str(pid_file)!r}, 'w').write(str(renderer.pid))\n"
        "two = (ChatMessage('user', 'hi'), ChatMessage('assistant', 'hello'))\n"
        f"if {busy}:\n"
        "    threading.Thread(target=renderer.render, args=([Conversation(two, False)], [1000], 2.0)).start()\n"
        "    time.sleep(0.5)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, timeout=WAIT_S, capture_output=True)
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()
    renderer_pid = int(pid_file.read_text())
    wait_for(lambda: not alive(renderer_pid), "the orphaned renderer to exit", timeout_s=30)
