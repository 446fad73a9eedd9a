"""The one loaded model, in a supervised engine process, shared by every front end.

- ``lease()`` holds the model for one answer; any number of leases run at once (the engine answers up to
  ``slots`` together and queues the rest), and past the waiting line a new one is refused with ``Busy``.
- ``switch()`` (and ``load()``) plans the new choice first (a choice that cannot work leaves the current model
  serving). Where both fit in memory, the new engine loads beside the serving one, which keeps answering; otherwise
  the answers in flight finish (or are cancelled), the old engine closes and the new one starts. Either way a
  model serves only once it has loaded and answered a first question (``probe``), a model is never closed under
  a running answer, a model that fails leaves (or brings back) the previous one, and ``cancel_load()`` ends a
  load that is stuck.
- An engine that dies on its own (killed, aborted, out of memory) ends the answers in flight with
  ``EngineStopped`` and is restarted; repeated crashes while loading stop the retries with the reason
  (``supervision.RestartPolicy``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path

from app.services.serving.model_handles import (
    Lease,
    ModelChoice,
    RuntimeStatus,
    State,
)
from app.services.serving.probe import PROBE_TIMEOUT_S, answer_first_question
from app.services.serving.supervision import RestartPolicy
from backends.base import Backend, LoadOptions, LoadProgress
from backends.engine.base import Engine
from backends.engine.client import EngineExit, EngineProcess
from backends.hardware import HardwareInventory
from backends.plan import BackendPlan, Preferences
from backends.selection import select_backend
from models.gguf import ModelInfo, read_model_info
from models.shared.errors import Busy, EngineStopped, HearthError, LoadCancelled, ModelNotReady, WorkersStopped

log = logging.getLogger(__name__)

EngineFactory = Callable[[str, ModelInfo, LoadOptions, Callable[[EngineExit], None]], Engine]
# Answers allowed to wait for a slot, beyond those being written; past that a request is refused with Busy.
DEFAULT_QUEUE_LIMIT = 16
DRAIN_REPORT_S = 1.0
# Free memory a second model must leave over to load beside the serving one.
ALONGSIDE_MARGIN_BYTES = 1 << 30


def fits_alongside(plan: BackendPlan, free_bytes: int, margin_bytes: int = ALONGSIDE_MARGIN_BYTES) -> bool:
    """Whether a new model may load while the current one keeps answering: only on the CPU (an accelerator's
    memory rarely holds two models) and only with room to spare in the memory free now."""
    return plan.cpu_only and free_bytes >= plan.memory.total_bytes + margin_bytes


def available_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


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
        free_memory: Callable[[], int] = available_memory,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
        current_inventory: Callable[[HardwareInventory], HardwareInventory] | None = None,
    ) -> None:
        """``current_inventory`` brings the start-up inventory up to date (free memory) before each plan."""
        self._inventory = inventory
        self._current_inventory = current_inventory
        self._automatic = automatic
        self._named = named
        self._make_engine = make_engine
        self._policy = policy or RestartPolicy()
        self._queue_limit = queue_limit
        self._free_memory = free_memory
        self._probe_timeout_s = probe_timeout_s
        self._changed = threading.Condition()  # guards everything below, and announces lease ends
        # One load, switch or restart at a time. A Lock, not an RLock: a switch is a generator that the page steps on
        # whichever of Gradio's worker threads is free, so the thread that releases it is often not the one that
        # took it, which an RLock refuses ("cannot release un-acquired lock", seen in the Models tab's Use).
        self._transition = threading.Lock()
        self._engine: Engine | None = None
        self._choice: ModelChoice | None = None
        self._plan: BackendPlan | None = None
        self._good: tuple[ModelChoice, ModelInfo, BackendPlan] | None = None  # the last choice that loaded
        self._leases: set[Lease] = set()
        self._switching = False
        self._error: HearthError | None = None
        self._state: State = "idle"
        self._message = "No model loaded yet."
        self._generation = 0  # the serving engine's; an exit or a restart for another one is dropped
        self._last_generation = 0  # the newest handed out (engines being loaded are not serving yet)
        self._booting: Engine | None = None  # the engine being loaded, which cancel_load() stops
        self._cancel_requested = False
        self._pending = ""  # a model loading beside the serving one
        self._closed = False
        self._threads: int | None = None  # CPU threads the engines compute with now (None: their plan's)

    # --- what front ends read -------------------------------------------------------------------------------
    @property
    def status(self) -> RuntimeStatus:
        with self._changed:
            engine = self._engine or (self._booting if self._state == "loading" else None)
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
                self._pending,
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
        inventory = self._current_inventory(self._inventory) if self._current_inventory else self._inventory
        return model, select_backend(inventory, model, choice.prefs, self._automatic, self._named)

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
        if self._state == "loading":
            raise ModelNotReady("The model is still loading.", "Wait a moment and send again.")
        if self._switching:
            raise ModelNotReady("Hearth is switching models.", "Send again in a moment.")
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
        """Replace the model with ``choice``, yielding progress. A choice that cannot be planned (a missing file,
        a device that is not there, a model that does not fit) changes nothing. Where both fit in memory the new
        model loads beside the old one, which keeps answering until the new one has loaded and answered a first
        question; otherwise answers in flight finish first (or, with ``cancel_running``, stop now, keeping what
        they wrote), the old model closes, and if the new one fails it is started again. Either way a model that
        fails raises its error and the previous one serves."""
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
                current = self._engine if self._state == "ready" and self._engine is not None else None
            if current is not None and current.alive and fits_alongside(plan, self._free_memory()):
                yield from self._switch_alongside(current, choice, model, plan, cancel_running)
            else:
                yield from self._switch_in_place(choice, model, plan, cancel_running)

    def _switch_alongside(
        self, old: Engine, choice: ModelChoice, model: ModelInfo, plan: BackendPlan, cancel_running: bool
    ) -> Iterator[LoadProgress]:
        with self._changed:
            self._pending = (
                f"Loading {model.display_name} on {plan.label}; {old.model.display_name} answers until it is ready"
            )
        try:
            engine, generation, (choice, model, plan) = yield from self._boot_without_stopped(choice, model, plan)
        finally:
            with self._changed:
                self._pending = ""
        with self._changed:
            self._commit(engine, generation, choice, model, plan)
            if cancel_running:
                for lease in self._leases:
                    if lease.engine is old:
                        lease.cancel()
        self._policy.after_ready()
        log.info("loaded %s on %s beside the previous model (%s)", model.display_name, plan.label, engine.pid)
        yield from self._drain(old)
        old.close()

    def _switch_in_place(
        self, choice: ModelChoice, model: ModelInfo, plan: BackendPlan, cancel_running: bool
    ) -> Iterator[LoadProgress]:
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
            except HearthError as failure:
                if previous is None or previous[0] == choice:
                    raise
                yield LoadProgress(
                    0.0, f"Could not load {model.display_name}; going back to {previous[1].display_name}"
                )
                try:
                    yield from self._start(*previous)
                except HearthError:
                    log.exception("the previous model did not load again either")
                raise failure from None
        finally:
            with self._changed:
                self._switching = False

    def cancel_load(self) -> bool:
        """Stop the load in progress: a model stuck loading, or slow to answer its first question. The model that
        was serving keeps serving (or is started again). Returns whether there was a load to stop."""
        with self._changed:
            engine = self._booting
            if engine is None:
                return False
            self._cancel_requested = True
        log.info("cancelling the load of %s", engine.model.display_name)
        engine.abort()
        return True

    def _drain(self, engine: Engine | None = None) -> Iterator[LoadProgress]:
        """Wait for the answers in flight (only those ``engine`` writes, when given)."""

        def waiting() -> int:
            return sum(1 for lease in self._leases if engine is None or lease.engine is engine)

        with self._changed:
            while count := waiting():
                self._changed.release()
                try:
                    yield LoadProgress(0.0, f"Waiting for {count} answer{'s' * (count != 1)} to finish")
                finally:
                    self._changed.acquire()
                self._changed.wait(DRAIN_REPORT_S)

    def _start(self, choice: ModelChoice, model: ModelInfo, plan: BackendPlan) -> Iterator[LoadProgress]:
        """Load ``choice`` as the one serving model (none serves meanwhile)."""
        with self._changed:
            self._choice, self._plan, self._error = choice, plan, None
            self._state, self._message = "loading", f"Loading on {plan.label}…"
        try:
            engine, generation, (choice, model, plan) = yield from self._boot_without_stopped(choice, model, plan)
        except HearthError as exc:
            with self._changed:
                self._fail(exc, choice)
            raise
        with self._changed:
            self._commit(engine, generation, choice, model, plan)
        self._policy.after_ready()
        log.info(
            "loaded %s on %s in engine process %s (%s)",
            model.display_name,
            plan.label,
            engine.pid,
            "; ".join(plan.reasons),
        )

    def _boot_without_stopped(
        self, choice: ModelChoice, model: ModelInfo, plan: BackendPlan
    ) -> Generator[LoadProgress, None, tuple[Engine, int, tuple[ModelChoice, ModelInfo, BackendPlan]]]:
        """:meth:`_boot`, planned again without the workers that stop while it loads (and loaded again, as after a
        crash); the choice, model and plan that loaded come back with the engine. A model that no longer fits
        without them raises why."""
        while True:
            try:
                engine, generation = yield from self._boot(choice, model, plan)
                return engine, generation, (choice, model, plan)
            except WorkersStopped as exc:
                lost = tuple(w for w in exc.workers if w in choice.prefs.workers)
                if not lost:
                    raise
                what = "did not answer (its server was held by another connection)" if exc.held_up else "stopped"
                log.warning("worker %s %s while %s loaded; loading again without it", lost, what, model.display_name)
                choice, model, plan = self._without_workers(choice, lost)
                yield LoadProgress(0.0, f"Worker {', '.join(lost)} {what} while loading; loading on {plan.label}")

    def _boot(
        self, choice: ModelChoice, model: ModelInfo, plan: BackendPlan
    ) -> Generator[LoadProgress, None, tuple[Engine, int]]:
        """Start an engine for ``choice`` and check it answers; it serves nothing until committed. Its exits are
        nobody's business but this load's until then (its generation is not the serving one)."""
        with self._changed:
            self._last_generation += 1
            generation = self._last_generation
            self._cancel_requested = False
        options = dataclasses.replace(
            plan.load_options(choice.seed, choice.cache_dir, choice.worker_links),
            saved_caches=choice.saved_caches,
        )
        engine = self._make_engine(plan.backend, model, options, lambda exit_: self._engine_exited(generation, exit_))
        with self._changed:
            self._booting = engine
        try:
            yield from engine.start()
            yield LoadProgress(1.0, "Checking that it answers")
            answer_first_question(engine, self._probe_timeout_s)
        except HearthError as exc:
            engine.close()
            with self._changed:
                cancelled = self._cancel_requested
            if cancelled:
                raise LoadCancelled(
                    f"Loading {model.display_name} was cancelled.",
                    "Pick a model in the Models tab when you are ready.",
                ) from exc
            raise
        finally:
            with self._changed:
                self._booting = None
        return engine, generation

    def _commit(
        self, engine: Engine, generation: int, choice: ModelChoice, model: ModelInfo, plan: BackendPlan
    ) -> None:
        """Make ``engine`` the one new answers use. Called with ``_changed`` held."""
        self._engine, self._generation = engine, generation
        self._choice, self._plan, self._error = choice, plan, None
        self._state, self._message = "ready", "Ready"
        self._good = (choice, model, plan)
        if self._threads is not None:
            engine.set_threads(min(self._threads, plan.threads))

    def set_threads(self, threads: int | None) -> None:
        """Let the engine compute with at most ``threads`` CPU threads (None: its plan's), from its next step on and
        for an engine loaded meanwhile too, so work beside it (indexing files) gets the other cores."""
        with self._changed:
            self._threads = threads
            engine, plan = self._engine, self._plan
        if engine is not None and plan is not None:
            engine.set_threads(None if threads is None else min(threads, plan.threads))

    def forget_owner(self, owner: str) -> None:
        """The conversation ``owner`` was deleted: the serving engine drops its caches and saves none of them."""
        with self._changed:
            engine = self._engine
        if engine is not None:
            engine.forget_owner(owner)

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
            if exit_.stopped_workers:
                self._message = f"Worker {', '.join(exit_.stopped_workers)} stopped; restarting the model without it…"
        log.error("engine process %s died (%s); restarting it", exit_.pid, exit_.description)
        threading.Thread(
            target=self._restart, args=(generation, exit_.stopped_workers), name="hearth-engine-restart", daemon=True
        ).start()

    def _without_workers(
        self, choice: ModelChoice, lost: tuple[str, ...]
    ) -> tuple[ModelChoice, ModelInfo, BackendPlan]:
        """The choice planned again without the workers that stopped: the others, or this machine alone."""
        remaining = tuple(w for w in choice.prefs.workers if w not in lost)
        backend = choice.prefs.backend if remaining else "auto"
        prefs = dataclasses.replace(choice.prefs, backend=backend, workers=remaining)
        fewer = dataclasses.replace(choice, prefs=prefs)
        model, plan = self.plan(fewer)
        return fewer, model, plan

    def _restart(self, generation: int, lost: tuple[str, ...] = ()) -> None:
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
                if lost:  # planned again without them; a model that no longer fits says so
                    try:
                        choice, model, plan = self._without_workers(choice, lost)
                    except HearthError as exc:
                        with self._changed:
                            self._fail(exc, choice)
                        return
                    lost = ()
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
            booting = self._booting
            for lease in self._leases:
                lease.cancel()
        if booting is not None:
            booting.abort()
        self._stop_engine()
