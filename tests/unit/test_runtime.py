"""The runtime's leases, switching and supervision, with the fake backend in this process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from app.services.serving.model_handles import ModelChoice
from app.services.serving.runtime import ModelRuntime, fits_alongside
from app.services.serving.supervision import RestartPolicy
from backends import registry
from backends.base import CancelToken, ChatEvent, ChatMessage, GenerationParams, LoadOptions, LoadProgress, TextDelta
from backends.engine.client import EngineExit
from backends.engine.local import LocalEngine
from backends.fake import FakeBackend
from backends.plan import Preferences
from models.gguf import ModelInfo
from models.shared.errors import Busy, EngineStopped, GenerationError, LoadCancelled, ModelLoadError, ModelNotReady
from tests.helpers import make_inventory, write_tiny_gguf

ExitHook = Callable[[EngineExit], None]


class CrashesAtLoad(LocalEngine):
    def start(self) -> Iterator[LoadProgress]:
        yield LoadProgress(0.1, "loading")
        raise EngineStopped("The engine stopped while loading (SIGABRT).", "Try another model.")


class StuckAtLoad(LocalEngine):
    """Loads until it is closed, like an engine stuck in a hostile file."""

    def __init__(self, backend: FakeBackend, model: ModelInfo, options: LoadOptions) -> None:
        super().__init__(backend, model, options)
        self.closed = threading.Event()

    def start(self) -> Iterator[LoadProgress]:
        yield LoadProgress(0.1, "loading")
        self.closed.wait(10)
        raise EngineStopped("The engine stopped while loading (SIGTERM).", "Try another model.")

    def close(self) -> None:
        self.closed.set()
        super().close()


class FailsFirstAnswer(LocalEngine):
    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        raise GenerationError("llama_decode returned -1.", "Try another model.")


class NeverAnswers(LocalEngine):
    """Loads, then hangs on its first answer until it is closed (a stuck engine does not hear a cancel)."""

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        closed = threading.Event()
        self.backend.close = closed.set  # type: ignore[method-assign]
        closed.wait(10)
        raise EngineStopped("The model stopped unexpectedly (SIGTERM); it is restarting.", "Send again.")


class Factory:
    """Hands out engines in order and keeps each one's exit hook, so a test can play a crash."""

    def __init__(self, *kinds: type[LocalEngine]) -> None:
        self.kinds = list(kinds)
        self.hooks: list[ExitHook] = []

    def __call__(self, _name: str, model: ModelInfo, options: LoadOptions, on_exit: ExitHook) -> LocalEngine:
        self.hooks.append(on_exit)
        kind = self.kinds.pop(0) if len(self.kinds) > 1 else self.kinds[0]
        return kind(FakeBackend(token_delay_s=0.005), model, options)


def make_runtime(
    factory: Factory, queue_limit: int = 16, free_memory: int = 0, probe_timeout_s: float = 10.0
) -> ModelRuntime:
    """A runtime over ``factory``'s engines; with no ``free_memory`` a switch replaces the model in place."""
    policy = RestartPolicy(max_load_crashes=3, first_delay_s=0.01)
    return ModelRuntime(
        make_inventory(),
        registry.AUTOMATIC,
        registry.ALL,
        factory,
        policy,
        queue_limit,
        free_memory=lambda: free_memory,
        probe_timeout_s=probe_timeout_s,
    )


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


def switch_in_background(runtime: ModelRuntime, choice: ModelChoice) -> tuple[threading.Thread, list[object]]:
    """Run a switch on a thread; the list gets its progress messages, then the error it raised or "done"."""
    results: list[object] = []

    def run() -> None:
        try:
            for progress in runtime.switch(choice):
                results.append(progress.message)
            results.append("done")
        except Exception as exc:
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, results


def test_a_model_loads_beside_the_serving_one_which_answers_until_it_is_ready(
    choice: ModelChoice, tmp_path: Path
) -> None:
    gate = threading.Event()

    class Gated(LocalEngine):
        def start(self) -> Iterator[LoadProgress]:
            gate.wait(10)
            yield from super().start()

    factory = Factory(LocalEngine)
    runtime = make_runtime(factory, free_memory=1 << 40)
    list(runtime.load(choice))
    factory.kinds = [Gated]
    other = ModelChoice(write_tiny_gguf(tmp_path / "other.gguf"), choice.prefs)
    thread, results = switch_in_background(runtime, other)
    wait_for(lambda: runtime.status.pending != "")
    assert "answers until it is ready" in runtime.status.pending and runtime.status.state == "ready"
    with runtime.lease() as old:  # the serving model answers while the new one loads
        events = list(old.stream_chat([ChatMessage("user", "hi")], GenerationParams(0.0, 8), CancelToken()))
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "You said: hi"
        gate.set()
        wait_for(lambda: runtime.choice == other)  # new answers go to the new model once it is ready...
        with runtime.lease() as new:
            assert new.engine is not old.engine
        wait_for(lambda: "Waiting for 1 answer to finish" in results)  # ...and the old one finishes its own
        assert old.engine.alive
    thread.join(10)
    assert results[-1] == "done" and runtime.status.pending == ""
    assert not old.engine.alive


def test_a_model_that_cannot_answer_a_first_question_never_serves(choice: ModelChoice, tmp_path: Path) -> None:
    for free_memory in (0, 1 << 40):  # in place, and beside the serving model
        factory = Factory(LocalEngine)
        runtime = make_runtime(factory, free_memory=free_memory)
        list(runtime.load(choice))
        factory.kinds = [FailsFirstAnswer, LocalEngine]
        other = ModelChoice(write_tiny_gguf(tmp_path / "other.gguf"), choice.prefs)
        with pytest.raises(ModelLoadError, match="could not answer a first question: llama_decode returned -1"):
            list(runtime.switch(other))
        assert runtime.status.state == "ready" and runtime.choice == choice
        with runtime.lease():
            pass


def test_a_first_answer_that_never_comes_is_given_up(choice: ModelChoice) -> None:
    runtime = make_runtime(Factory(NeverAnswers), probe_timeout_s=0.2)
    with pytest.raises(ModelLoadError, match="did not answer a first question within 0 s"):
        list(runtime.load(choice))
    assert runtime.status.state == "error"


def test_cancel_stops_a_stuck_load_and_the_previous_model_serves(choice: ModelChoice, tmp_path: Path) -> None:
    assert make_runtime(Factory(LocalEngine)).cancel_load() is False  # nothing is loading
    for free_memory in (0, 1 << 40):
        factory = Factory(LocalEngine)
        runtime = make_runtime(factory, free_memory=free_memory)
        list(runtime.load(choice))
        factory.kinds = [StuckAtLoad, LocalEngine]
        other = ModelChoice(write_tiny_gguf(tmp_path / "other.gguf"), choice.prefs)
        thread, results = switch_in_background(runtime, other)
        wait_for(lambda started=results: "loading" in started)  # type: ignore[misc]
        assert runtime.cancel_load() is True
        thread.join(10)
        assert isinstance(results[-1], LoadCancelled), results
        assert runtime.status.state == "ready" and runtime.choice == choice
        with runtime.lease():
            pass


def test_cancel_at_start_leaves_no_model_and_says_so(choice: ModelChoice) -> None:
    runtime = make_runtime(Factory(StuckAtLoad))
    thread, results = switch_in_background(runtime, choice)
    wait_for(lambda: runtime.status.state == "loading" and "loading" in results)
    runtime.cancel_load()
    thread.join(10)
    assert isinstance(results[-1], LoadCancelled)
    assert runtime.status.state == "error" and "cancelled" in runtime.status.message
    with pytest.raises(LoadCancelled), runtime.lease():
        pass


def test_only_a_cpu_plan_with_room_to_spare_loads_beside_another() -> None:
    from backends.memory import MemoryEstimate
    from backends.plan import CPU, BackendPlan, Placement, cuda_device

    memory = MemoryEstimate(weights_bytes=2 << 30, kv_cache_bytes=1 << 30, compute_bytes=0)
    on_cpu = (Placement(CPU, "CPU", 24, memory, 8 << 30),)
    on_gpu = (Placement(CPU, "CPU", 0, memory, 8 << 30), Placement(cuda_device(0), "GPU", 24, memory, 8 << 30))
    cpu = BackendPlan("llamacpp", "CPU", 4, 4096, memory, (), placements=on_cpu)
    gpu = BackendPlan("llamacpp", "GPU", 4, 4096, memory, (), placements=on_gpu)
    assert fits_alongside(cpu, free_bytes=5 << 30)
    assert not fits_alongside(cpu, free_bytes=3 << 30)  # fits, but without the margin
    assert not fits_alongside(gpu, free_bytes=64 << 30)


def test_a_switch_stepped_on_other_threads_finishes_and_the_next_one_can_start(choice: ModelChoice) -> None:
    """The page runs each step of a switch on whichever worker thread is free: the step that ends it (and lets the
    one-at-a-time lock go) may run on another thread than the step that began it."""
    from concurrent.futures import ThreadPoolExecutor

    runtime = make_runtime(Factory(LocalEngine))
    list(runtime.load(choice))
    switch = runtime.switch(choice)
    steps: list[object] = []
    with ThreadPoolExecutor(1) as first, ThreadPoolExecutor(1) as second:
        steps.append(first.submit(next, switch).result())  # "Reading the model file", before the lock
        steps.append(first.submit(next, switch).result())  # the lock taken on this thread
        while (step := second.submit(next, switch, None).result()) is not None:  # ends on another
            steps.append(step)
    assert len(steps) > 2
    list(runtime.switch(choice))  # the lock was let go
    with runtime.lease() as engine:
        assert engine.context_length == 512
