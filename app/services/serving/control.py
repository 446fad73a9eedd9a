"""The model actions every front end shares — the page, the CLI and the API call these, never the runtime's
internals: load the model at start, use another model, switch backend or device, change the context.

Settings are read once, at start; what runs afterwards is the runtime's current choice, changed only here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pydantic import ValidationError

from app.paths import DataPaths
from app.services.catalog.models import open_model_store
from app.services.serving.model_handles import ModelChoice
from app.services.serving.runtime import ModelRuntime
from app.settings import BackendSettings, ModelSettings
from backends import registry
from backends.base import LoadProgress
from backends.plan import Preferences
from models.shared.errors import InvalidChoice


@dataclass(frozen=True)
class StartChoice:
    """The model Hearth starts with, and in words the rule that picked it."""

    choice: ModelChoice
    why: str


class ModelControl:
    def __init__(self, runtime: ModelRuntime, paths: DataPaths, initial: Callable[[], StartChoice]) -> None:
        """``initial`` finds the model Hearth starts with (it reads the catalog, and raises if there is none)."""
        self._runtime = runtime
        self._paths = paths
        self._find_initial = initial
        self._initial: StartChoice | None = None
        self._chosen = False  # a model was picked here (Use for chat, `hearth use`) since Hearth started

    @property
    def choice(self) -> ModelChoice:
        """The choice in force: what is loaded (or loading), else what Hearth starts with."""
        return self._runtime.choice or self.initial

    @property
    def initial(self) -> ModelChoice:
        return self._start.choice

    @property
    def why(self) -> str:
        """Which rule picked the model in use: the user's choice, or the default rule (see models.default)."""
        from models.default import RULE_WORDS

        return RULE_WORDS["choice"] if self._chosen else self._start.why

    @property
    def _start(self) -> StartChoice:
        if self._initial is None:
            self._initial = self._find_initial()
        return self._initial

    @property
    def preferences(self) -> Preferences:
        return self.choice.prefs

    def start(self) -> Iterator[LoadProgress]:
        """Load the model Hearth starts with."""
        return self._runtime.load(self.initial)

    def cancel_load(self) -> bool:
        """Stop a model load in progress; the model serving before keeps (or goes back to) serving."""
        return self._runtime.cancel_load()

    def use_model(self, reference: str, cancel_running: bool = False) -> Iterator[LoadProgress]:
        """Chat with a model from the catalog from now on. It becomes the default (used after a restart) only
        once it has loaded; if it fails, the previous model keeps serving."""
        return self.change(model=reference, cancel_running=cancel_running)

    def switch_backend(self, backend: str, device: str, cancel_running: bool = False) -> Iterator[LoadProgress]:
        """Run the same model on another backend or device. A choice that cannot work here is refused with the
        reason, and the model that is running keeps running."""
        return self.change(backend=backend, device=device or "auto", cancel_running=cancel_running)

    def set_context(self, context_length: int, cancel_running: bool = False) -> Iterator[LoadProgress]:
        return self.change(context_length=context_length, cancel_running=cancel_running)

    def change(
        self,
        model: str | None = None,
        backend: str | None = None,
        device: str | None = None,
        context_length: int | None = None,
        cancel_running: bool = False,
    ) -> Iterator[LoadProgress]:
        """Any of: another model (an id or file name from the catalog), backend, device or context, in one
        reload. Checked before anything stops: a bad value is refused and the running model keeps running."""
        choice = self.choice
        stored = None
        if model is not None:
            store = open_model_store(self._paths)
            try:
                stored = store.find(model)
            finally:
                store.close()
            choice = dataclasses.replace(choice, path=stored.path)
        prefs = choice.prefs
        if backend is not None or device is not None:
            checked = _checked_backend(backend or prefs.backend, device or prefs.device)
            prefs = dataclasses.replace(prefs, backend=checked.name, device=checked.device)
            uses_workers = (found := registry.choice_named(checked.name)) is not None and found.uses_workers
            if uses_workers and not prefs.workers:  # every paired worker, as `--backend pipeline`
                from app.services.workers import WorkerBook

                paired = WorkerBook(self._paths.workers_file).chosen()
                workers = tuple(worker.address for worker in paired)
                facts = tuple(worker.link_facts for worker in paired)
                prefs = dataclasses.replace(prefs, workers=workers, worker_links=facts)
                choice = dataclasses.replace(choice, worker_links=tuple(worker.link for worker in paired))
        if context_length is not None:
            prefs = dataclasses.replace(prefs, context_length=_checked_context(context_length))
        yield from self._runtime.switch(dataclasses.replace(choice, prefs=prefs), cancel_running)
        if stored is not None:
            store = open_model_store(self._paths)
            try:
                store.set_default(stored.id)
            finally:
                store.close()
            self._chosen = True


def _checked_backend(backend: str, device: str) -> BackendSettings:
    try:
        return BackendSettings.model_validate({"name": backend, "device": device})
    except ValidationError as exc:
        problems = "; ".join(str(error["msg"]) for error in exc.errors(include_url=False))
        named = {"name": "backend", "device": "device"}
        fields = " and ".join(sorted({named.get(str(e["loc"][0]), "setting") for e in exc.errors() if e["loc"]}))
        raise InvalidChoice(
            f"That {fields or 'backend or device'} is not valid: {problems}.",
            f"Pick a backend ({', '.join(registry.choice_names())}) and a device (auto, cpu, cuda, cuda:N, gpu, npu).",
        ) from None


def _checked_context(context_length: int) -> int:
    try:
        return ModelSettings.model_validate({"context_length": context_length}).context_length
    except ValidationError as exc:
        problems = "; ".join(str(error["msg"]) for error in exc.errors(include_url=False))
        raise InvalidChoice(
            f"That context length is not valid: {problems}.", "Use 256 to 1,048,576 tokens (the model caps it further)."
        ) from None
