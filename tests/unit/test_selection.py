from pathlib import Path

import pytest

from backends import registry
from backends.plan import CPU, NoBackend, Preferences
from backends.selection import select_backend
from models.gguf import ModelInfo, read_model_info
from models.shared.errors import BackendUnavailable, DoesNotFit
from tests.helpers import make_inventory, write_tiny_gguf


@pytest.fixture
def model(tmp_path: Path) -> ModelInfo:
    return read_model_info(write_tiny_gguf(tmp_path / "m.gguf", context_length=8192))


def select(model: ModelInfo, prefs: Preferences | None = None, **inventory: object):  # type: ignore[no-untyped-def]
    return select_backend(
        make_inventory(**inventory),  # type: ignore[arg-type]
        model,
        prefs or Preferences(),
        registry.AUTOMATIC,
        registry.ALL,
    )


def test_cpu_laptop_gets_llamacpp_with_one_thread_per_physical_core(model: ModelInfo) -> None:
    plan = select(model, physical_cores=6)
    assert plan.backend == "llamacpp"
    assert plan.threads == 6
    assert plan.devices == (CPU,)
    assert plan.context_length == 4096
    assert any("one per physical core" in reason for reason in plan.reasons)


def test_context_is_capped_at_what_the_model_was_trained_for(model: ModelInfo) -> None:
    plan = select(model, Preferences(context_length=32768))
    assert plan.context_length == 8192
    assert any("32768 was asked for" in reason for reason in plan.reasons)


def test_configured_threads_win(model: ModelInfo) -> None:
    assert select(model, Preferences(threads=3)).threads == 3


def test_forcing_the_demo_backend(model: ModelInfo) -> None:
    plan = select(model, Preferences(backend="fake"))
    assert plan.backend == "fake"
    assert "chosen by you" in plan.reasons[0]


def test_unknown_backend_lists_the_choices(model: ModelInfo) -> None:
    with pytest.raises(BackendUnavailable) as caught:
        select(model, Preferences(backend="tpu"))
    assert "llamacpp" in caught.value.remedy


def test_no_llamacpp_build_is_explained(model: ModelInfo) -> None:
    with pytest.raises(NoBackend) as caught:
        select(model, llama=False)
    assert "llama-cpp-python is not installed" in caught.value.message
    assert "make run" in caught.value.message


def test_a_model_that_does_not_fit_says_so_with_a_remedy(tmp_path: Path) -> None:
    huge_context = read_model_info(write_tiny_gguf(tmp_path / "big.gguf", context_length=1_000_000))
    with pytest.raises(DoesNotFit) as caught:
        select(huge_context, Preferences(context_length=1_000_000), ram_available_gib=0.6)
    assert "Lower the context to" in caught.value.remedy
    assert "available" in caught.value.message
