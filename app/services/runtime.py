"""The one loaded model, in a supervised engine process, shared by every front end.

- ``lease()`` holds the model for one answer; any number of leases run at once (the engine answers up to
  ``slots`` together and queues the rest), and past the waiting line a new one is refused with ``Busy``.
- ``switch()`` (and ``load()``) plans the new choice first (a choice that cannot work leaves the current model
  serving), then waits for the answers in flight, or cancels them, closes the old engine and starts the new
  one. A model is never closed under a running answer. If the new model fails to load, the previous one is
  started again.
- An engine that dies on its own (killed, aborted, out of memory) ends the answers in flight with
  ``EngineStopped`` and is restarted; repeated crashes while loading stop the retries with the reason
  (``supervision.RestartPolicy``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from app.errors import Busy, EngineStopped, HearthError, ModelNotReady
from app.services.supervision import RestartPolicy
from backends.base import Backend, CancelToken, ChatEvent, ChatMessage, GenerationParams, LoadOptions, LoadProgress
from backends.engine.base import Engine
from backends.engine.client import EngineExit, EngineProcess
from backends.hardware import HardwareInventory
from backends.selection import BackendPlan, Preferences, select_backend
from models.gguf import ModelInfo, read_model_info

log = logging.getLogger(__name__)

State = Literal["idle", "loading", "ready", "restarting", "error"]
EngineFactory = Callable[[str, ModelInfo, LoadOptions, Callable[[EngineExit], None]], Engine]
# Answers allowed to wait for a slot, beyond those being written; past that a request is refused with Busy.
DEFAULT_QUEUE_LIMIT = 16
DRAIN_REPORT_S = 1.0


@dataclass(frozen=True)
class RuntimeStatus:
    state: State
    model_name: str = ""
    message: str = ""
    plan: BackendPlan | None = None
    notes: tuple[str, ...] = field(default=())
    engine_pid: int | None = None
    answers: int = 0  # answers being written or waiting for a slot
    slots: int = 0


@dataclass(frozen=True)
class ModelChoice:
    """What to load: a GGUF file and the user's preferences for running it."""

    path: Path
    prefs: Preferences
    seed: int = 0
    cache_dir: str | None = None


class Lease:
    """The model, held for one answer. Streams started through it can be cancelled by a switch."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._cancels: list[CancelToken] = []

    @property
    def model(self) -> ModelInfo:
        return self._engine.model

    @property
    def context_length(self) -> int:
        return self._engine.context_length

    @property
    def slots(self) -> int:
        return self._engine.slots

    @property
    def notes(self) -> tuple[str, ...]:
        return self._engine.notes

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        self._cancels.append(cancel)
        return self._engine.stream_chat(messages, params, cancel)

    def stream_completion(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]:
        self._cancels.append(cancel)
        return self._engine.stream_completion(prompt, params, cancel)

    def count_tokens(self, text: str) -> int:
        return self._engine.count_tokens(text)

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self._engine.count_chat_tokens(messages)

    def cancel(self) -> None:
        for token in self._cancels:
            token.cancel()


def start_engine(
    backend: str, model: ModelInfo, options: LoadOptions, on_exit: Callable[[EngineExit], None]
) -> EngineProcess:
    return EngineProcess(backend, model, options, on_exit)


class ModelRuntime:
    def __init__(
        self,
        inventory: HardwareInventory,
        automatic: tuple[type[Backend], ...],
        named: dict[str, type[Backend]],
        make_engine: EngineFactory = start_engine,
        policy: RestartPolicy | None = None,
        queue_limit: int = DEFAULT_QUEUE_LIMIT,
    ) -> None:
        self._inventory = inventory
        self._automatic = automatic
        self._named = named
        self._make_engine = make_engine
        self._policy = policy or RestartPolicy()
        self._queue_limit = queue_limit
        self._changed = threading.Condition()  # guards everything below, and announces lease ends
        self._transition = threading.RLock()  # one load, switch or restart at a time
        self._engine: Engine | None = None
        self._choice: ModelChoice | None = None
        self._plan: BackendPlan | None = None
        self._good: tuple[ModelChoice, ModelInfo, BackendPlan] | None = None  # the last choice that loaded
        self._leases: set[Lease] = set()
        self._switching = False
        self._error: HearthError | None = None
        self._state: State = "idle"
        self._message = "No model loaded yet."
        self._generation = 0  # bumped for every engine started; a restart for an older one is dropped
        self._closed = False

    # --- what front ends read -------------------------------------------------------------------------------
    @property
    def status(self) -> RuntimeStatus:
        with self._changed:
            engine = self._engine
            ready = engine is not None and self._state == "ready"
            return RuntimeStatus(
                self._state,
                engine.model.display_name if engine else (self._choice.path.name if self._choice else ""),
                self._message,
                self._plan,
                engine.notes if ready and engine else (),
                engine.pid if engine else None,
                len(self._leases),
                engine.slots if ready and engine else 0,
            )

    @property
    def model(self) -> ModelInfo | None:
        with self._changed:
            return self._engine.model if self._engine is not None and self._state == "ready" else None

    @property
    def choice(self) -> ModelChoice | None:
        """What is loaded (or being loaded) now."""
        return self._choice

    def plan(self, choice: ModelChoice) -> tuple[ModelInfo, BackendPlan]:
        model = read_model_info(choice.path)
        return model, select_backend(self._inventory, model, choice.prefs, self._automatic, self._named)

    @contextmanager
    def lease(self) -> Iterator[Lease]:
        """Hold the model for one answer. Raises :class:`ModelNotReady` while there is none to hold (loading,
        restarting, switching) and :class:`Busy` when every slot is taken and the waiting line is full."""
        with self._changed:
            engine = self._serving()
            if len(self._leases) >= engine.slots + self._queue_limit:
                raise Busy(
                    f"Hearth is answering {len(self._leases)} requests already.",
                    "Try again in a few seconds.",
                    retry_after_s=2,
                )
            lease = Lease(engine)
            self._leases.add(lease)
        try:
            yield lease
        finally:
            with self._changed:
                self._leases.discard(lease)
                self._changed.notify_all()

    def _serving(self) -> Engine:
        if self._state == "ready" and not self._switching and self._engine is not None and self._engine.alive:
            return self._engine
        if self._state == "error" and self._error is not None:
            raise self._error
        if self._switching:
            raise ModelNotReady("Hearth is switching models.", "Send again in a moment.")
        if self._state == "loading":
            raise ModelNotReady("The model is still loading.", "Wait a moment and send again.")
        if self._state == "restarting":
            raise ModelNotReady(self._message, "Send again in a moment; Hearth restarts the model by itself.")
        if self._state == "ready":  # the engine died a moment ago; its supervisor is about to hear of it
            raise ModelNotReady(
                "The model stopped unexpectedly; it is restarting.",
                "Send again in a moment; Hearth restarts the model by itself.",
            )
        raise ModelNotReady("No model is loaded.", "Pick a model, or restart Hearth to load the default one.")

    # --- loading and switching ------------------------------------------------------------------------------
    def load(self, choice: ModelChoice) -> Iterator[LoadProgress]:
        """Load ``choice`` (waiting for answers in flight if a model is already loaded)."""
        return self.switch(choice)

    def switch(self, choice: ModelChoice, cancel_running: bool = False) -> Iterator[LoadProgress]:
        """Replace the model with ``choice``, yielding progress. Answers in flight finish first, or with
        ``cancel_running`` stop now (keeping what they wrote). A choice that cannot be planned (a missing file, a
        device that is not there, a model that does not fit) changes nothing; a model that fails to load is
        replaced by the previous one again, and the error is raised."""
        yield LoadProgress(0.0, "Reading the model file")
        try:
            model, plan = self.plan(choice)
        except HearthError as exc:
            with self._changed:
                if self._engine is None:
                    self._fail(exc, choice)
            raise
        with self._transition:
            with self._changed:
                self._switching = True
                if cancel_running:
                    for lease in self._leases:
                        lease.cancel()
            try:
                yield from self._drain()
                self._stop_engine()
                previous = self._good
                try:
                    yield from self._start(choice, model, plan)
                except HearthError:
                    if previous is not None and previous[0] != choice:
                        yield LoadProgress(
                            0.0, f"Could not load {model.display_name}; going back to {previous[1].display_name}"
                        )
                        error = self._error
                        try:
                            yield from self._start(*previous)
                        except HearthError:
                            log.exception("the previous model did not load again either")
                        if error is not None:
                            raise error from None
                    raise
            finally:
                with self._changed:
                    self._switching = False

    def _drain(self) -> Iterator[LoadProgress]:
        with self._changed:
            while self._leases:
                count = len(self._leases)
                self._changed.release()
                try:
                    yield LoadProgress(0.0, f"Waiting for {count} answer{'s' * (count != 1)} to finish")
                finally:
                    self._changed.acquire()
                self._changed.wait(DRAIN_REPORT_S)

    def _start(self, choice: ModelChoice, model: ModelInfo, plan: BackendPlan) -> Iterator[LoadProgress]:
        with self._changed:
            self._generation += 1
            generation = self._generation
            self._choice, self._plan, self._error = choice, plan, None
            self._state, self._message = "loading", f"Loading on {plan.label}…"
        options = plan.load_options(choice.seed, choice.cache_dir)
        engine = self._make_engine(plan.backend, model, options, lambda exit_: self._engine_exited(generation, exit_))
        with self._changed:
            self._engine = engine
        try:
            yield from engine.start()
        except HearthError as exc:
            engine.close()
            with self._changed:
                if self._engine is engine:
                    self._engine = None
                self._fail(exc, choice)
            raise
        with self._changed:
            self._state, self._message = "ready", "Ready"
            self._good = (choice, model, plan)
        self._policy.after_ready()
        log.info(
            "loaded %s on %s in engine process %s (%s)",
            model.display_name,
            plan.label,
            engine.pid,
            "; ".join(plan.reasons),
        )

    def _stop_engine(self) -> None:
        with self._changed:
            engine, self._engine = self._engine, None
            self._state, self._message = "idle", "Closed."
        if engine is not None:
            engine.close()

    def _fail(self, exc: HearthError, choice: ModelChoice) -> None:
        self._error = exc
        self._state = "error"
        self._message = f"{exc.message} {exc.remedy}"
        self._choice = choice
        log.error("model load failed: %s", exc)

    def record_error(self, error: HearthError) -> None:
        """Remember a failure that happened before loading could start (for example, no model file)."""
        with self._changed:
            self._error = error
            self._state = "error"
            self._message = f"{error.message} {error.remedy}"

    # --- supervision ----------------------------------------------------------------------------------------
    def _engine_exited(self, generation: int, exit_: EngineExit) -> None:
        """Called from the engine's reader thread when its process ends."""
        with self._changed:
            serving = generation == self._generation and self._state == "ready" and not exit_.expected
            if not serving or self._closed:
                return
            self._state = "restarting"
            self._message = f"The model stopped unexpectedly ({exit_.description}); it is restarting…"
        log.error("engine process %s died (%s); restarting it", exit_.pid, exit_.description)
        threading.Thread(target=self._restart, args=(generation,), name="hearth-engine-restart", daemon=True).start()

    def _restart(self, generation: int) -> None:
        decision = self._policy.after_crash(time.monotonic(), while_loading=False)
        while True:
            if not decision.restart:
                self._give_up(decision.reason)
                return
            time.sleep(decision.delay_s)
            with self._transition:
                with self._changed:
                    if generation != self._generation or self._closed or self._good is None:
                        return  # a switch or a close happened meanwhile
                    choice, model, plan = self._good
                try:
                    for _ in self._start(choice, model, plan):
                        pass
                    return
                except EngineStopped as exc:
                    generation = self._generation
                    decision = self._policy.after_crash(time.monotonic(), while_loading=True)
                    if decision.restart:
                        with self._changed:
                            self._state = "restarting"
                            self._message = f"{exc.message} Trying again in {decision.delay_s:.0f} s…"
                except HearthError:
                    return  # _start recorded it: the status line and every chat attempt show it

    def _give_up(self, reason: str) -> None:
        error = ModelNotReady(
            f"The model stopped unexpectedly and Hearth stopped restarting it: {reason}.",
            "Pick another model or backend (Models or Hardware tab), or restart Hearth.",
        )
        with self._changed:
            self._fail(error, self._choice or ModelChoice(Path("?"), Preferences()))

    def close(self) -> None:
        with self._changed:
            self._closed = True
            for lease in self._leases:
                lease.cancel()
        self._stop_engine()
