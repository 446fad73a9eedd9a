"""The pipelined plan: whole layer ranges per worker, in order, on llama.cpp; the run otherwise as on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends import registry
from backends.plan import BackendPlan, Preferences
from backends.selection import select_backend
from backends.workers.plan import layer_ranges
from models.gguf import ModelInfo, read_model_info
from models.shared.errors import BackendUnavailable
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
    # every layer on the workers (and the output projection, as llama.cpp counts it), then kept here by an override
    assert options.gpu_layers == model.block_count + 1 and options.output_on_cpu
    assert sum(options.tensor_split) == model.block_count
    on_workers = [p for p in plan.placements if p.device.kind == "worker"]
    assert [p.layers for p in on_workers] == [len(r) for r in layer_ranges(model.block_count, 2)]
    # this CPU's place holds no layer, the output projection instead: the engine's override is read off it
    here = plan.placements[0]
    assert (here.device.kind, here.layers, here.output) == ("cpu", 0, True) and len(plan.placements) == 3
    assert plan.reasons[0] == "llama.cpp split across 2 workers: chosen by you"
    assert plan.reasons[1].endswith("on the worker at 127.0.0.1:50052")
    assert plan.threads == 4 and options.slots == 2
    assert plan.reasons[3].startswith("the output layer on this CPU: each token brings back the last worker's")
    assert plan.reasons[4].startswith("slower than this machine alone")  # two CPU workers, unmeasured links


def test_the_plan_counts_the_measured_links_and_a_gpu_worker_is_not_called_slower(model: ModelInfo) -> None:
    from backends.workers.cost import LinkFacts

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
    # a GPU holding the last layer runs the output projection too
    assert plan.load_options().gpu_layers == model.block_count + 1 and not plan.output_on_cpu


def test_asking_for_the_pipeline_without_workers_says_how_to_get_one(model: ModelInfo) -> None:
    with pytest.raises(BackendUnavailable) as refused:
        select_backend(make_inventory(), model, Preferences(backend="pipeline"), registry.AUTOMATIC, registry.ALL)
    assert "hearth worker" in refused.value.remedy and "hearth workers add" in refused.value.remedy


GIB = 1 << 30


def _big(model: ModelInfo, layers: int = 30, layer_bytes: int = GIB // 2) -> ModelInfo:
    """The tiny model's shape, with layers as heavy as a 15 GB model's."""
    import dataclasses

    return dataclasses.replace(model, block_count=layers, layer_bytes=(layer_bytes,) * layers)


def _links(*free_gib: float) -> tuple[tuple[str, ...], tuple[object, ...]]:
    from backends.workers.cost import LinkFacts

    workers = tuple(f"10.0.0.{index + 2}:50052" for index in range(len(free_gib)))
    free_bytes = [int(free * GIB) for free in free_gib]
    links = tuple(LinkFacts(0.3, 110e6, w, "CPU: Test", free) for w, free in zip(workers, free_bytes, strict=True))
    return workers, links


def _split(model: ModelInfo, ram_gib: float, *free_gib: float) -> tuple[tuple[str, ...], BackendPlan]:
    """The pipeline plan for workers with ``free_gib`` free each, on a machine with ``ram_gib`` available."""
    workers, links = _links(*free_gib)
    prefs = Preferences(backend="pipeline", workers=workers, worker_links=links)  # type: ignore[arg-type]
    return workers, select_backend(
        make_inventory(ram_available_gib=ram_gib), model, prefs, registry.AUTOMATIC, registry.ALL
    )


def test_layers_follow_the_workers_free_memory_and_this_cpu_holds_the_first_ones_they_cannot(
    model: ModelInfo,
) -> None:
    workers, plan = _split(_big(model), 4, 10, 5)  # 4 GiB here: too little for the whole model
    first, second = plan.tensor_split
    assert first > 1.5 * second  # twice the free memory, about twice the layers
    local = 30 - int(first + second)
    # llama.cpp keeps the first ones on the CPU; it counts the output projection as one more layer to offload
    assert local > 0 and plan.gpu_layers == 30 - local + 1
    assert plan.output_on_cpu  # CPU workers: the output projection runs here
    assert plan.label == "llama.cpp split across 2 workers and this CPU"
    assert plan.reasons[1] == f"layers 0-{local - 1} on this CPU (the workers cannot hold them)"
    assert plan.reasons[2] == f"layers {local}-{local + int(first) - 1} on the worker at {workers[0]}"
    assert [str(p.device) for p in plan.placements] == ["CPU", f"RPC {workers[0]}", f"RPC {workers[1]}"]
    assert not any("slower than this machine alone" in r for r in plan.reasons)  # it does not fit here


def test_a_worker_with_too_little_memory_holds_nothing_and_a_model_too_big_for_all_is_refused(
    model: ModelInfo,
) -> None:
    workers, plan = _split(_big(model), 4, 20, 0.6)
    assert plan.tensor_split[1] == 0
    assert f"no layer on {workers[1]}: 614 MiB free holds none with its cache" in plan.reasons
    with pytest.raises(BackendUnavailable) as refused:
        _split(_big(model), 2, 3, 3)
    workers = _links(3, 3)[0]
    assert "cannot hold the model's 30 layers" in refused.value.message
    assert f"{workers[0]}: " in refused.value.message and "3.0 GiB free" in refused.value.message
    assert "Pair another worker" in refused.value.remedy


def test_workers_with_no_room_for_a_single_layer_are_no_split(model: ModelInfo) -> None:
    with pytest.raises(BackendUnavailable) as refused:
        _split(_big(model), 16, 0.6)
    workers = _links(0.6)[0]
    assert refused.value.message.startswith("No worker has room for one of this model's layers")
    assert f"{workers[0]}: 614 MiB free" in refused.value.message and "backend auto" in refused.value.remedy


def test_a_quantized_context_cache_is_planned_smaller_and_said(model: ModelInfo) -> None:
    plans = {
        kind: select_backend(
            make_inventory(), model, Preferences(kv_cache_type=kind, slots=2), registry.AUTOMATIC, registry.ALL
        )
        for kind in ("f16", "q8_0", "q4_0")
    }
    caches = {kind: plan.memory.kv_cache_bytes for kind, plan in plans.items()}
    assert caches["q8_0"] == pytest.approx(caches["f16"] * 34 / 64, rel=0.01)
    assert caches["q4_0"] == pytest.approx(caches["f16"] * 18 / 64, rel=0.01)
    assert plans["q8_0"].load_options().kv_cache_type == "q8_0"
    assert plans["f16"].reasons[-1].startswith("context cache in f16 (2 bytes a value; --kv-cache q8_0")
    said = "context cache in q4_0 (0.56 bytes a value, with flash attention), as configured; q4_0 can ruin"
    assert plans["q4_0"].reasons[-1].startswith(said)
    assert plans["q8_0"].reasons[-1].endswith("as configured")


@pytest.mark.parametrize(
    ("blocks", "capacities", "weights", "counts"),
    [
        (30, (30, 30), (2.0, 1.0), (20, 10)),  # twice as fast, twice the layers
        (30, (12, 30), (2.0, 1.0), (12, 18)),  # the fast one full: the rest to the other
        (30, (5, 5, 30), (1.0, 1.0, 1.0), (5, 5, 20)),  # two fill up, the third takes the rest
        (31, (30, 30), (1.0, 1.0), (16, 15)),  # whole layers, the remainder to the first
        (30, (10, 10), (3.0, 1.0), (10, 10)),  # they cannot hold all 30: what they hold
        (30, (0, 30), (5.0, 1.0), (0, 30)),  # no room at all on the fast one
    ],
)
def test_layers_follow_the_weights_within_each_capacity(
    blocks: int, capacities: tuple[int, ...], weights: tuple[float, ...], counts: tuple[int, ...]
) -> None:
    from backends.memory import split_layers, weighted_split

    assert weighted_split(blocks, capacities, weights) == counts
    assert weighted_split(blocks, capacities, tuple(float(c) for c in capacities)) == split_layers(blocks, capacities)


def _speed_links(*speeds_gb: float, free_gib: float = 0) -> tuple[tuple[str, ...], tuple[object, ...]]:
    from backends.workers.cost import LinkFacts

    workers = tuple(f"10.0.0.{index + 2}:50052" for index in range(len(speeds_gb)))
    links = tuple(
        LinkFacts(0.3, 110e6, w, "CPU: Test", int(free_gib * GIB), speed * 1e9)
        for w, speed in zip(workers, speeds_gb, strict=True)
    )
    return workers, links


def test_a_faster_worker_holds_more_layers_and_the_plan_says_why(model: ModelInfo) -> None:
    workers, links = _speed_links(12.0, 4.0)
    prefs = Preferences(backend="pipeline", workers=workers, worker_links=links)  # type: ignore[arg-type]
    plan = select_backend(make_inventory(), _big(model, 32, 1 << 20), prefs, registry.AUTOMATIC, registry.ALL)
    assert plan.tensor_split == (24.0, 8.0)
    said = f"layers in proportion to each worker's measured memory read speed ({workers[0]} 12.0 GB/s, {workers[1]}"
    assert said in plan.reasons[3]


def test_a_worker_not_measured_counts_at_the_others_mean_and_free_memory_still_caps(model: ModelInfo) -> None:
    from backends.workers.plan import worker_speeds

    workers, links = _speed_links(6.0, 0.0, 2.0)
    assert worker_speeds(links) == (6e9, 4e9, 2e9)  # type: ignore[arg-type]
    assert worker_speeds(_speed_links(0.0, 0.0)[1]) == ()  # type: ignore[arg-type]
    # 10 GiB free holds 18 of these half-GiB layers with their cache: by speed the fast one would take 28 of 30
    workers, links = _speed_links(12.0, 1.0, free_gib=10)
    prefs = Preferences(backend="pipeline", workers=workers, worker_links=links)  # type: ignore[arg-type]
    plan = select_backend(make_inventory(ram_available_gib=2), _big(model), prefs, registry.AUTOMATIC, registry.ALL)
    assert plan.tensor_split == (18.0, 12.0)  # the fast one full; the slow one the rest
    assert any(r.endswith("within its free memory") for r in plan.reasons)


def _with_gpus(
    model: ModelInfo, *gpus: tuple[str, float, float], **asked: object
) -> tuple[tuple[str, ...], BackendPlan]:
    """The pipeline plan on a machine with NVIDIA ``gpus`` (name, total GiB, free GiB) and two CPU workers with 10 GiB
    free each."""
    workers, links = _links(10, 10)
    prefs = Preferences(backend="pipeline", workers=workers, worker_links=links, **asked)  # type: ignore[arg-type]
    return workers, select_backend(
        make_inventory(ram_available_gib=4, gpus=gpus), model, prefs, registry.AUTOMATIC, registry.ALL
    )


def test_a_gpu_here_takes_layers_first_last_in_the_chain_with_the_output_projection(model: ModelInfo) -> None:
    big = _big(model)  # 30 layers of 512 MiB
    workers, plan = _with_gpus(big, ("NVIDIA GeForce RTX 4060", 8, 7.5))
    devices = [str(p.device) for p in plan.placements]
    # llama.cpp lists the RPC devices before its own GPUs and lays the layers out in that order
    assert devices == [f"RPC {workers[0]}", f"RPC {workers[1]}", "cuda:0"]
    on_gpu = plan.placements[-1]
    assert 0 < on_gpu.layers < 30 and on_gpu.layer_range.stop == 30  # as many as fit, the last ones
    assert plan.tensor_split == tuple(float(p.layers) for p in plan.placements)
    assert sum(plan.tensor_split) == 30 and plan.gpu_layers == 31  # the output projection goes with the GPU's layers
    assert not plan.output_on_cpu  # no logits cross the network: they are made on the GPU here
    assert plan.label == "llama.cpp split across 2 workers and 1 GPU here"
    assert any(r.endswith("(cuda:0): filled first, no link to cross") for r in plan.reasons)
    assert not plan.load_options().one_gpu  # a split: llama.cpp's layer mode


def test_a_gpu_here_that_holds_the_model_leaves_the_workers_without_a_layer_or_a_link_cost(model: ModelInfo) -> None:
    workers, plan = _with_gpus(_big(model, layers=30, layer_bytes=GIB // 8), ("NVIDIA GeForce RTX 4090", 24, 23.5))
    assert plan.tensor_split == (0.0, 0.0, 30.0)
    assert f"no layer on {workers[0]}: the GPU here holds them all" in plan.reasons
    assert not any("on the links" in r or "proportion" in r for r in plan.reasons)


def test_the_chain_names_every_gpu_here_and_one_asked_for_alone_holds_the_layers(model: ModelInfo) -> None:
    pair = (("NVIDIA GeForce RTX 4090", 24, 23.5), ("NVIDIA GeForce RTX 3060", 12, 11.6))
    _, plan = _with_gpus(_big(model), *pair, device="cuda:1")
    assert [str(p.device) for p in plan.placements][-2:] == ["cuda:0", "cuda:1"]  # both, by number, as llama.cpp
    assert plan.tensor_split[-2] == 0 and plan.tensor_split[-1] > 0
    _, on_cpu = _with_gpus(_big(model), *pair, device="cpu")
    assert not any(p.device.kind == "cuda" for p in on_cpu.placements)


def test_the_gpu_with_the_last_layers_has_room_for_the_output_projection_whichever_it_is(model: ModelInfo) -> None:
    import dataclasses

    from backends.memory import usable_bytes
    from backends.placement import GPU_HEADROOM_BYTES

    # 30 layers of 256 MiB and a 2 GiB output projection: with the first GPU roomy enough for every layer but not
    # for them and the output, the output must be counted where it lands, on the GPU taking the last layers
    heavy = dataclasses.replace(_big(model, layer_bytes=GIB // 4), output_bytes=2 * GIB, output_tied=False)
    for tenths in range(70, 131, 5):
        free = tenths / 10
        _, plan = _with_gpus(heavy, ("NVIDIA GeForce RTX 4080", 16, free), ("NVIDIA GeForce RTX 3050", 4, 3.6))
        on_gpus = [p for p in plan.placements if p.device.kind == "cuda" and p.layers]
        assert on_gpus and on_gpus[-1].layer_range.stop == 30, free  # the GPUs hold the last layers
        for placement in on_gpus:
            assert placement.memory.total_bytes <= usable_bytes(placement.available_bytes, GPU_HEADROOM_BYTES), free
        assert on_gpus[-1].memory.weights_bytes >= on_gpus[-1].layers * GIB // 4 + 2 * GIB  # the output counted
        assert plan.label.startswith("llama.cpp split across 2 workers") and "GPU" in plan.label


def test_one_gpu_without_a_split_loads_in_llama_cpps_single_device_mode() -> None:
    from backends.base import LoadOptions

    assert LoadOptions(4096, 4, gpu_layers=33, main_gpu=1).one_gpu  # only GPU 1 may hold the layers
    assert not LoadOptions(4096, 4, gpu_layers=33, tensor_split=(22.0, 10.0)).one_gpu  # a split across devices
    assert not LoadOptions(4096, 4).one_gpu  # the CPU alone: a CPU-only build has no device 0 to name
