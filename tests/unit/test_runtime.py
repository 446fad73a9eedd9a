"""The runtime's leases, switching and supervision, with the fake backend in this process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.errors import Busy, EngineStopped, ModelNotReady
from app.services.runtime import ModelChoice, ModelRuntime
from app.services.supervision import RestartPolicy
from backends import registry
from backends.base import CancelToken, ChatMessage, GenerationParams, LoadOptions, LoadProgress, TextDelta
from backends.engine.client import EngineExit
from backends.engine.local import LocalEngine
from backends.fake import FakeBackend
from backends.selection import Preferences
from models.gguf import ModelInfo
from tests.helpers import make_inventory, write_tiny_gguf

ExitHook = Callable[[EngineExit], None]


class CrashesAtLoad(LocalEngine):
    def start(self) -> Iterator[LoadProgress]:
        yield LoadProgress(0.1, "loading")
        raise EngineStopped("The engine stopped while loading (SIGABRT).", "Try another model.")


class Factory:
    """Hands out engines in order and keeps each one's exit hook, so a test can play a crash."""

    def __init__(self, *kinds: type[LocalEngine]) -> None:
        self.kinds = list(kinds)
        self.hooks: list[ExitHook] = []

    def __call__(self, _name: str, model: ModelInfo, options: LoadOptions, on_exit: ExitHook) -> LocalEngine:
        self.hooks.append(on_exit)
        kind = self.kinds.pop(0) if len(self.kinds) > 1 else self.kinds[0]
        return kind(FakeBackend(token_delay_s=0.005), model, options)


def make_runtime(factory: Factory, queue_limit: int = 16) -> ModelRuntime:
    policy = RestartPolicy(max_load_crashes=3, first_delay_s=0.01)
    return ModelRuntime(make_inventory(), registry.AUTOMATIC, registry.ALL, factory, policy, queue_limit)


@pytest.fixture
def choice(tmp_path: Path) -> ModelChoice:
    return ModelChoice(write_tiny_gguf(tmp_path / "tiny.gguf"), Preferences(backend="fake", context_length=512))


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_leases_are_refused_until_a_model_is_loaded(choice: ModelChoice) -> None:
    runtime = make_runtime(Factory(LocalEngine))
    with pytest.raises(ModelNotReady, match="No model"), runtime.lease():
        pass
    list(runtime.load(choice))
    with runtime.lease() as engine:
        assert engine.context_length == 512


def test_past_the_slots_and_the_waiting_line_requests_are_busy(choice: ModelChoice) -> None:
    runtime = make_runtime(Factory(LocalEngine), queue_limit=2)
    list(runtime.load(choice))
    held = [runtime.lease() for _ in range(3)]  # 1 slot + 2 waiting
    for lease in held:
        lease.__enter__()
    with pytest.raises(Busy) as caught, runtime.lease():
        pass
    assert caught.value.retry_after_s > 0
    held[0].__exit__(None, None, None)
    with runtime.lease():
        pass


def test_a_switch_waits_for_leases_and_new_ones_wait_for_the_switch(choice: ModelChoice) -> None:
    runtime = make_runtime(Factory(LocalEngine))
    list(runtime.load(choice))
    lease = runtime.lease()
    lease.__enter__()
    switch = runtime.switch(choice)
    assert next(switch).message == "Reading the model file"
    assert next(switch).message == "Waiting for 1 answer to finish"
    with pytest.raises(ModelNotReady, match="switching"), runtime.lease():
        pass
    lease.__exit__(None, None, None)
    list(switch)
    assert runtime.status.state == "ready"


def test_a_switch_can_cancel_running_answers(choice: ModelChoice) -> None:
    runtime = make_runtime(Factory(LocalEngine))
    list(runtime.load(choice))
    reasons: list[str] = []

    def answer() -> None:
        with runtime.lease() as engine:
            words = " ".join(["word"] * 200)  # about 1.5 s of answer at 5 ms a word
            events = list(engine.stream_chat([ChatMessage("user", words)], GenerationParams(0.0, 4000), CancelToken()))
            reasons.append(type(events[-1]).__name__ + ":" + getattr(events[-1], "reason", ""))

    writer = threading.Thread(target=answer)
    writer.start()
    wait_for(lambda: runtime.status.answers == 1)
    list(runtime.switch(choice, cancel_running=True))
    writer.join(10)
    assert reasons == ["Finished:cancelled"]


def test_a_crash_restarts_the_engine(choice: ModelChoice) -> None:
    factory = Factory(LocalEngine)
    runtime = make_runtime(factory)
    list(runtime.load(choice))
    factory.hooks[-1](EngineExit(4242, -9, expected=False))
    wait_for(lambda: runtime.status.state == "ready" and len(factory.hooks) == 2)
    with runtime.lease() as engine:
        events = engine.stream_chat([ChatMessage("user", "hi")], GenerationParams(0.0, 8), CancelToken())
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "You said: hi"


def test_repeated_crashes_while_loading_stop_the_retries_and_say_why(choice: ModelChoice) -> None:
    factory = Factory(LocalEngine, CrashesAtLoad)
    runtime = make_runtime(factory)
    list(runtime.load(choice))
    factory.hooks[-1](EngineExit(4242, -6, expected=False))
    wait_for(lambda: runtime.status.state == "error")
    assert len(factory.hooks) == 1 + 3  # the first engine, then three tries
    assert "crashed 3 times in a row while loading" in runtime.status.message
    with pytest.raises(ModelNotReady, match="stopped restarting"), runtime.lease():
        pass


def test_an_exit_hearth_asked_for_is_no_crash(choice: ModelChoice) -> None:
    factory = Factory(LocalEngine)
    runtime = make_runtime(factory)
    list(runtime.load(choice))
    factory.hooks[-1](EngineExit(4242, 0, expected=True))
    assert runtime.status.state == "ready" and len(factory.hooks) == 1


def test_a_model_that_fails_to_load_brings_the_previous_one_back(choice: ModelChoice, tmp_path: Path) -> None:
    factory = Factory(LocalEngine, CrashesAtLoad, LocalEngine)
    runtime = make_runtime(factory)
    list(runtime.load(choice))
    other = ModelChoice(write_tiny_gguf(tmp_path / "other.gguf"), choice.prefs)
    with pytest.raises(EngineStopped):
        list(runtime.switch(other))
    assert runtime.status.state == "ready"
    assert runtime.choice == choice
