"""`hearth doctor` prints the same plans for the fixture machines as it did before the selection was reshaped.

The recorded lines are in ``tests/unit/data/doctor_plans.json``: what the doctor prints (the Plan or Problem section)
and the options the engine would load with, for each machine of ``test_selection_fixtures`` and the pipeline's
worker cases. A change to them is a change of behaviour: look at the difference, and only when it is meant, record
again with ``python -m tests.unit.test_doctor_plans``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.cli.commands import plan_lines, plan_report
from backends import registry
from backends.hardware import HardwareInventory
from backends.plan import Preferences
from backends.selection import select_backend
from backends.workers.cost import LinkFacts
from models.gguf import ModelInfo
from tests.helpers import make_inventory
from tests.unit.test_selection_fixtures import CORE_ULTRA, GEMMA, LLAMA_7B, LLAMA_7B_K, MIXTRAL, SMALL

RECORD = Path(__file__).parent / "data" / "doctor_plans.json"
GIB = 1 << 30
WORKERS = ("10.0.0.2:50052", "10.0.0.3:50052")


def _links(*facts: tuple[str, float, float]) -> tuple[LinkFacts, ...]:
    """(device, free GiB, read GB/s) per worker, on measured 110 MB/s links."""
    return tuple(
        LinkFacts(0.3, 110e6, address, device, int(free * GIB), speed * 1e9)
        for address, (device, free, speed) in zip(WORKERS, facts, strict=False)
    )


def _laptop() -> HardwareInventory:
    return make_inventory(ram_available_gib=5.5, ram_total_gib=8, physical_cores=4)


def _ultra() -> HardwareInventory:
    return make_inventory(ram_available_gib=24, ram_total_gib=32, physical_cores=6, openvino=CORE_ULTRA)


def _gpu8() -> HardwareInventory:
    return make_inventory(ram_available_gib=12, physical_cores=6, gpus=(("NVIDIA GeForce RTX 3060 Ti", 8, 6),))


def _pair() -> HardwareInventory:
    return make_inventory(
        ram_available_gib=60, gpus=(("NVIDIA GeForce RTX 3090", 24, 23.4), ("NVIDIA GeForce RTX 3060", 12, 11.6))
    )


def _big(layers: int, layer_mib: float) -> ModelInfo:
    return dataclasses.replace(LLAMA_7B, block_count=layers, layer_bytes=(int(layer_mib * (1 << 20)),) * layers)


# name: (the machine, the model, what the user asked for)
CASES: dict[str, tuple[Callable[[], HardwareInventory], ModelInfo, dict[str, Any]]] = {
    "laptop-small": (_laptop, SMALL, {}),
    "laptop-7b-does-not-fit": (_laptop, LLAMA_7B, {}),
    "laptop-7b-smaller-context": (_laptop, LLAMA_7B, {"context_length": 2048}),
    "workstation-7b": (lambda: make_inventory(ram_available_gib=58, ram_total_gib=64, physical_cores=16), LLAMA_7B, {}),
    "core-ultra-7b": (_ultra, LLAMA_7B, {}),
    "core-ultra-7b-npu": (_ultra, LLAMA_7B, {"device": "npu"}),
    "core-ultra-gemma": (_ultra, GEMMA, {}),
    "core-ultra-k-quant": (_ultra, LLAMA_7B_K, {}),
    "gpu-8gb-7b": (_gpu8, LLAMA_7B, {}),
    "gpu-8gb-7b-on-cpu": (_gpu8, LLAMA_7B, {"device": "cpu"}),
    "gpu-8gb-7b-10-layers": (_gpu8, LLAMA_7B, {"gpu_layers": 10}),
    "gpu-8gb-mixtral-too-many-layers": (_gpu8, MIXTRAL, {"gpu_layers": 32}),
    "gpu-8gb-7b-two-slots-q8": (_gpu8, LLAMA_7B, {"slots": 2, "kv_cache_type": "q8_0"}),
    "gpu-24gb-7b": (
        lambda: make_inventory(ram_available_gib=28, gpus=(("NVIDIA GeForce RTX 4090", 24, 23.5),)),
        LLAMA_7B,
        {},
    ),
    "gpu-pair-mixtral": (_pair, MIXTRAL, {}),
    "gpu-pair-7b-second-gpu": (_pair, LLAMA_7B, {"device": "cuda:1"}),
    "broken-driver-7b": (
        lambda: make_inventory(gpu_problem="an NVIDIA GPU is present but its driver did not answer (NVML timeout)"),
        LLAMA_7B,
        {},
    ),
    "no-avx2-small": (lambda: make_inventory(flags=frozenset({"avx", "sse4_2"})), SMALL, {}),
    "gpu-without-cuda-7b": (
        lambda: make_inventory(gpus=(("NVIDIA GeForce RTX 4070", 12, 11),), cuda=False),
        LLAMA_7B,
        {},
    ),
    "forced-openvino-cpu": (lambda: make_inventory(openvino=(("CPU", "AMD EPYC"),)), SMALL, {"backend": "openvino"}),
    "forced-cuda-without-gpu": (make_inventory, LLAMA_7B, {"backend": "cuda"}),
    "forced-llamacpp-3-threads": (make_inventory, SMALL, {"backend": "llamacpp", "threads": 3}),
    "short-memory-openvino": (
        lambda: make_inventory(ram_available_gib=0.86, openvino=(("CPU", "Test CPU"),)),
        SMALL,
        {"backend": "openvino", "context_length": 8192},
    ),
    "short-memory-llamacpp": (
        lambda: make_inventory(ram_available_gib=0.86, openvino=(("CPU", "Test CPU"),)),
        SMALL,
        {"backend": "llamacpp", "context_length": 8192},
    ),
    "pipeline-two-cpu-workers-unmeasured": (
        make_inventory,
        SMALL,
        {"backend": "pipeline", "workers": WORKERS, "slots": 2},
    ),
    "pipeline-gpu-worker": (
        make_inventory,
        SMALL,
        {
            "backend": "pipeline",
            "workers": WORKERS[:1],
            "worker_links": (LinkFacts(5.0, 12.5e6, WORKERS[0], "CUDA0: RTX 4090"),),
        },
    ),
    "pipeline-by-read-speed": (
        make_inventory,
        _big(32, 1),
        {"backend": "pipeline", "workers": WORKERS, "worker_links": _links(("CPU: Test", 0, 12), ("CPU: Test", 0, 4))},
    ),
    "pipeline-capped-by-free-memory": (
        lambda: make_inventory(ram_available_gib=2),
        _big(30, 512),
        {
            "backend": "pipeline",
            "workers": WORKERS,
            "worker_links": _links(("CPU: Test", 10, 12), ("CPU: Test", 10, 1)),
        },
    ),
    # A GPU here and workers in one chain: the GPU takes the layers first and holds the output projection.
    "pipeline-gpu-here-and-cpu-workers": (
        lambda: make_inventory(ram_available_gib=12, gpus=(("NVIDIA GeForce RTX 4060", 8, 7.5),)),
        MIXTRAL,
        {
            "backend": "pipeline",
            "workers": WORKERS,
            "worker_links": _links(("CPU: Test", 20, 12), ("CPU: Test", 10, 8)),
        },
    ),
    "pipeline-gpu-here-holds-it-all": (
        lambda: make_inventory(gpus=(("NVIDIA GeForce RTX 4090", 24, 23.5),)),
        LLAMA_7B,
        {"backend": "pipeline", "workers": WORKERS[:1], "worker_links": _links(("CPU: Test", 10, 12))[:1]},
    ),
    "pipeline-too-big-for-the-workers": (
        lambda: make_inventory(ram_available_gib=2),
        _big(30, 512),
        {"backend": "pipeline", "workers": WORKERS, "worker_links": _links(("CPU: Test", 3, 0), ("CPU: Test", 3, 0))},
    ),
}


def observed(name: str) -> dict[str, Any]:
    """What the doctor prints for one case, and the options the engine would load with (when there is a plan)."""
    machine, model, asked = CASES[name]
    inventory, prefs = machine(), Preferences(**asked)
    report = plan_report(inventory, model, prefs)
    result: dict[str, Any] = {"doctor": plan_lines(report)}
    if "error" not in report:
        options = select_backend(inventory, model, prefs, registry.AUTOMATIC, registry.ALL).load_options()
        result["load_options"] = json.loads(json.dumps(dataclasses.asdict(options)))
    return result


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_doctor_prints_the_recorded_plan(name: str) -> None:
    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    assert name in recorded, f"no record for {name}: run python -m tests.unit.test_doctor_plans"
    assert observed(name) == recorded[name]


def test_every_record_has_a_case() -> None:
    assert sorted(json.loads(RECORD.read_text(encoding="utf-8"))) == sorted(CASES)


if __name__ == "__main__":  # record again (only when a change of plan is meant)
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(json.dumps({name: observed(name) for name in sorted(CASES)}, indent=1) + "\n", encoding="utf-8")
    sys.stdout.write(f"recorded {len(CASES)} plans in {RECORD}\n")
