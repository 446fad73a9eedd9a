"""The shared model actions: checked before anything stops, the running model kept on a bad choice, and the
default changed only once the new model has loaded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.catalog.models import open_model_store
from app.services.container import Services, build_services
from app.settings import load_settings
from backends.fake import FakeBackend
from models.shared.errors import HearthError
from tests.helpers import local_engines, make_inventory, write_tiny_gguf


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    settings = load_settings(model={"path": model, "context_length": 1024}, backend={"name": "fake"})
    services = build_services(settings, inventory=make_inventory(), make_engine=local_engines(FakeBackend))
    list(services.control.start())
    yield services
    services.close()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"context_length": 100}, "context length is not valid"),
        ({"backend": "turbo"}, "backend is not valid"),
        ({"device": "tpu"}, "device is not valid"),
        ({"model": "no-such-model"}, "No model"),
    ],
)
def test_a_bad_choice_changes_nothing(services: Services, change: dict[str, object], message: str) -> None:
    before = services.runtime.status
    with pytest.raises(HearthError, match=message):
        list(services.control.change(**change))  # type: ignore[arg-type]
    after = services.runtime.status
    assert after.state == "ready" and after.plan == before.plan


def test_the_context_changes_in_one_reload(services: Services) -> None:
    list(services.control.set_context(512))
    status = services.runtime.status
    assert status.plan is not None and status.plan.context_length == 512
    assert services.control.choice.prefs.context_length == 512


def test_a_model_becomes_the_default_once_it_has_loaded(services: Services, tmp_path: Path) -> None:
    other = write_tiny_gguf(tmp_path / "other.gguf", tensors=3)  # other bytes, so another SHA-256
    store = open_model_store(services.paths)
    try:
        stored, _ = store.add(other)
        assert store.default() is None
    finally:
        store.close()
    list(services.control.use_model(stored.id))
    assert services.runtime.choice is not None and services.runtime.choice.path == other
    store = open_model_store(services.paths)
    try:
        default = store.default()
        assert default is not None and default.id == stored.id
    finally:
        store.close()
