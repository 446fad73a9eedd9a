"""The pipelined plan: whole layer ranges per worker, in order, on llama.cpp; the run otherwise as on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import BackendUnavailable
from backends import registry
from backends.pipeline_plan import layer_ranges
from backends.selection import Preferences, select_backend
from models.gguf import ModelInfo, read_model_info
from tests.helpers import make_inventory, write_tiny_gguf


@pytest.mark.parametrize(
    ("layers", "workers", "counts"),
    [(30, 2, [15, 15]), (31, 2, [16, 15]), (30, 4, [8, 8, 7, 7]), (2, 3, [1, 1, 0]), (30, 1, [30])],
)
def test_layers_are_split_in_whole_consecutive_ranges(layers: int, workers: int, counts: list[int]) -> None:
    ranges = layer_ranges(layers, workers)
    assert [len(r) for r in ranges] == counts
    assert [layer for r in ranges for layer in r] == list(range(layers))


def test_no_worker_is_no_split() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        layer_ranges(30, 0)


@pytest.fixture
def model(tmp_path: Path) -> ModelInfo:
    return read_model_info(write_tiny_gguf(tmp_path / "m.gguf", context_length=8192))


def test_the_plan_puts_every_layer_on_the_workers_and_says_which(model: ModelInfo) -> None:
    workers = ("127.0.0.1:50052", "127.0.0.1:50053")
    plan = select_backend(
        make_inventory(physical_cores=4),
        model,
        Preferences(backend="pipeline", workers=workers, slots=2),
        registry.AUTOMATIC,
        registry.ALL,
    )
    options = plan.load_options()
    assert plan.backend == "llamacpp" and options.workers == workers
    assert options.gpu_layers == -1
    assert sum(options.tensor_split) == model.block_count
    assert [p.layers for p in plan.placements] == [len(r) for r in layer_ranges(model.block_count, 2)]
    assert plan.reasons[0] == "llama.cpp split across 2 workers: chosen by you"
    assert plan.reasons[1].endswith("on the worker at 127.0.0.1:50052")
    assert plan.threads == 4 and options.slots == 2
    assert plan.reasons[3].startswith("slower than this machine alone")  # two CPU workers, unmeasured links


def test_the_plan_counts_the_measured_links_and_a_gpu_worker_is_not_called_slower(model: ModelInfo) -> None:
    from backends.pipeline_cost import LinkFacts

    workers = ("10.0.0.2:50052",)
    links = (LinkFacts(round_trip_ms=5.0, bytes_per_s=12.5e6, address=workers[0], device="CUDA0: RTX 4090"),)
    plan = select_backend(
        make_inventory(),
        model,
        Preferences(backend="pipeline", workers=workers, worker_links=links),
        registry.AUTOMATIC,
        registry.ALL,
    )
    wait = plan.reasons[2]
    assert wait.startswith("each token also waits about ") and wait.endswith(" ms on the links")
    assert float(wait.split("about ")[1].split(" ms")[0]) > 5.0  # the round trip and the bytes at 100 Mbit/s


def test_asking_for_the_pipeline_without_workers_says_how_to_get_one(model: ModelInfo) -> None:
    with pytest.raises(BackendUnavailable) as refused:
        select_backend(make_inventory(), model, Preferences(backend="pipeline"), registry.AUTOMATIC, registry.ALL)
    assert "hearth worker" in refused.value.remedy and "hearth workers add" in refused.value.remedy
