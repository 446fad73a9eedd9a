"""The one resident model: which file, which backend, its load state. The previous model is closed before
the next one loads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from app.errors import HearthError, ModelNotReady
from backends.base import Backend, LoadProgress
from backends.hardware import HardwareInventory
from backends.selection import BackendPlan, Preferences, select_backend
from models.gguf import ModelInfo, read_model_info

log = logging.getLogger(__name__)

State = Literal["idle", "loading", "ready", "error"]
BackendFactory = Callable[[str], Backend]


@dataclass(frozen=True)
class RuntimeStatus:
    state: State
    model_name: str = ""
    message: str = ""
    plan: BackendPlan | None = None
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class ModelChoice:
    """What to load: a GGUF file and the user's preferences for running it."""

    path: Path
    prefs: Preferences
    seed: int = 0
    cache_dir: str | None = None


class ModelRuntime:
    def __init__(
        self,
        inventory: HardwareInventory,
        make_backend: BackendFactory,
        automatic: tuple[type[Backend], ...],
        named: dict[str, type[Backend]],
    ) -> None:
        self._inventory = inventory
        self._make_backend = make_backend
        self._automatic = automatic
        self._named = named
        self._backend: Backend | None = None
        self._model: ModelInfo | None = None
        self._error: HearthError | None = None
        self._status = RuntimeStatus("idle", message="No model loaded yet.")
        self._lock = threading.Lock()

    @property
    def status(self) -> RuntimeStatus:
        return self._status

    @property
    def model(self) -> ModelInfo | None:
        return self._model

    def plan(self, choice: ModelChoice) -> tuple[ModelInfo, BackendPlan]:
        model = read_model_info(choice.path)
        return model, select_backend(self._inventory, model, choice.prefs, self._automatic, self._named)

    def load(self, choice: ModelChoice) -> Iterator[LoadProgress]:
        """Validate, plan and load ``choice``, yielding progress. A choice that cannot be planned (a missing file,
        a device that is not there, a model that does not fit) leaves the current model loaded and serving; a load
        that fails leaves no model, and every later chat attempt reports why."""
        with self._lock:
            yield LoadProgress(0.0, "Reading the model file")
            try:
                model, plan = self.plan(choice)
            except HearthError as exc:
                if self._backend is None:
                    self._fail(exc, choice)
                raise
            self._close_current()
            self._status = RuntimeStatus("loading", model.display_name, f"Loading on {plan.label}…", plan)
            try:
                backend = self._make_backend(plan.backend)
                yield from backend.load(model, plan.load_options(choice.seed, choice.cache_dir))
            except HearthError as exc:
                self._fail(exc, choice)
                raise
            self._backend, self._model, self._error = backend, model, None
            self._status = RuntimeStatus("ready", model.display_name, "Ready", plan, backend.notes)
            log.info("loaded %s on %s (%s)", model.display_name, plan.label, "; ".join(plan.reasons))

    def _fail(self, exc: HearthError, choice: ModelChoice) -> None:
        self._error = exc
        self._status = RuntimeStatus("error", choice.path.name, f"{exc.message} {exc.remedy}")
        log.error("model load failed: %s", exc)

    def record_error(self, error: HearthError, model_name: str = "") -> None:
        """Remember a failure that happened before loading could start (for example, no model file)."""
        self._error = error
        self._status = RuntimeStatus("error", model_name, f"{error.message} {error.remedy}")

    def backend(self) -> Backend:
        if self._backend is not None:
            return self._backend
        if self._error is not None:
            raise self._error
        if self._status.state == "loading":
            raise ModelNotReady("The model is still loading.", "Wait a moment and send again.")
        raise ModelNotReady("No model is loaded.", "Pick a model, or restart Hearth to load the default one.")

    def _close_current(self) -> None:
        if self._backend is not None:
            self._backend.close()
        self._backend = None
        self._model = None

    def close(self) -> None:
        with self._lock:
            self._close_current()
            self._status = RuntimeStatus("idle", message="Closed.")
