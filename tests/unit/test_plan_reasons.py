"""Why each route Hearth weighs was not taken, for fixture machines: named, with the measured or known reason."""

from __future__ import annotations

import pytest

from backends import registry
from backends.hardware import HardwareInventory
from backends.plan import BackendPlan, Preferences
from backends.plan_reasons import openvino_cpu_reason
from backends.registry import unavailable_reason as unavailable_backend_reason
from backends.selection import select_backend
from models.gguf import ModelInfo
from tests.helpers import make_inventory
from tests.unit.test_selection_fixtures import CORE_ULTRA, LLAMA_7B, LLAMA_7B_K, SMALL

EPYC = (("CPU", "AMD EPYC"),)
AVX512 = frozenset({"avx2", "fma", "avx512f"})


def plan_for(model: ModelInfo, inventory: HardwareInventory) -> BackendPlan:
    return select_backend(inventory, model, Preferences(), registry.AUTOMATIC, registry.ALL)


def not_chosen(plan: BackendPlan) -> list[str]:
    return [reason for reason in plan.reasons if reason.startswith("Not chosen — ")]


@pytest.mark.parametrize(
    ("machine", "model", "headline", "expected"),
    [
        (
            make_inventory(openvino=EPYC),  # this project's machines: AVX2-only EPYC, no GPU
            SMALL,
            "llama.cpp (CPU): chosen automatically — no GPU or NPU here can run this model",
            [
                "Not chosen — NVIDIA GPU (llama.cpp with CUDA): no NVIDIA GPU found",
                "Not chosen — Intel GPU (OpenVINO): no Intel GPU found (OpenVINO sees: CPU)",
                "Not chosen — Intel NPU (OpenVINO): no NPU present (OpenVINO sees: CPU)",
                "Not chosen — OpenVINO on the CPU: available, but slower here (measured 0.58× llama.cpp's decode "
                "speed on an AVX2-only AMD EPYC",
            ],
        ),
        (
            make_inventory(openvino=EPYC, flags=AVX512),
            SMALL,
            "llama.cpp (CPU): chosen automatically",
            ["Not chosen — OpenVINO on the CPU: available, about the same decode speed as llama.cpp (measured 1.02×"],
        ),
        (
            make_inventory(ram_available_gib=24, openvino=CORE_ULTRA),
            LLAMA_7B_K,  # Q4_K_M mixes in Q6_K tensors
            "llama.cpp (CPU): chosen automatically",
            [
                "Not chosen — NVIDIA GPU (llama.cpp with CUDA): no NVIDIA GPU found",
                "Not chosen — Intel GPU (OpenVINO) / Intel NPU (OpenVINO) / OpenVINO on the CPU: OpenVINO's GGUF "
                "reader cannot read Q6_K weights (Q4_K_M mixes them in)",
            ],
        ),
        (
            make_inventory(ram_available_gib=24, openvino=CORE_ULTRA),
            LLAMA_7B,
            "OpenVINO (GPU): chosen automatically — the Intel GPU runs the model and leaves the CPU free",
            [
                "Not chosen — NVIDIA GPU (llama.cpp with CUDA): no NVIDIA GPU found",
                "Not chosen — Intel NPU (OpenVINO) / OpenVINO on the CPU / llama.cpp on the CPU: would run, but "
                "comes after OpenVINO (GPU)",
            ],
        ),
        (
            make_inventory(ram_available_gib=28, gpus=(("NVIDIA GeForce RTX 4090", 24, 23.5),), openvino=EPYC),
            LLAMA_7B,
            "llama.cpp (CUDA): chosen automatically — the whole model fits on the NVIDIA GPU",
            [
                "Not chosen — Intel GPU (OpenVINO): no Intel GPU found",
                "Not chosen — Intel NPU (OpenVINO): no NPU present",
                "Not chosen — OpenVINO on the CPU / llama.cpp on the CPU: would run, but comes after llama.cpp (CUDA)",
            ],
        ),
        (
            make_inventory(gpu_problem="an NVIDIA GPU is present but its driver did not answer (NVML timeout)"),
            SMALL,  # and OpenVINO is not installed
            "llama.cpp (CPU): chosen automatically",
            [
                "Not chosen — NVIDIA GPU (llama.cpp with CUDA): an NVIDIA GPU is present but its driver did not "
                "answer (NVML timeout); check the driver with `nvidia-smi`",
                "Not chosen — Intel GPU (OpenVINO) / Intel NPU (OpenVINO) / OpenVINO on the CPU: OpenVINO GenAI is "
                "not installed",
            ],
        ),
        (
            make_inventory(ram_available_gib=12, gpus=(("NVIDIA GeForce RTX 3060 Ti", 8, 0.3),)),
            LLAMA_7B,  # a GPU with almost nothing free
            "llama.cpp (CPU): chosen automatically",
            ["Not chosen — NVIDIA GPU (llama.cpp with CUDA): NVIDIA GeForce RTX 3060 Ti (307 MiB free): not even one"],
        ),
    ],
)
def test_every_route_not_taken_is_named_with_its_reason(
    machine: HardwareInventory, model: ModelInfo, headline: str, expected: list[str]
) -> None:
    plan = plan_for(model, machine)
    assert plan.reasons[0].startswith(headline)
    assert "best fit" not in plan.reasons[0]  # never "because it is best"
    lines = not_chosen(plan)
    for start in expected:
        assert any(line.startswith(start) for line in lines), (start, lines)
    named = " ".join(lines)
    routes = ("NVIDIA GPU", "Intel GPU", "Intel NPU", "OpenVINO on the CPU", "llama.cpp on the CPU")
    chosen_route = {"llama.cpp (CPU)": "llama.cpp on the CPU", "OpenVINO (GPU)": "Intel GPU"}.get(
        plan.label, "NVIDIA GPU"
    )
    assert all(route in named for route in routes if route != chosen_route)  # each other route, once
    assert chosen_route not in named


def test_a_forced_choice_says_so_and_still_names_an_idle_gpu() -> None:
    machine = make_inventory(gpus=(("NVIDIA GeForce RTX 4070", 12, 11),), cuda=False, openvino=EPYC)
    plan = select_backend(machine, SMALL, Preferences(backend="openvino"), registry.AUTOMATIC, registry.ALL)
    assert plan.reasons[0] == "OpenVINO (CPU): chosen by you"
    assert not not_chosen(plan)


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (frozenset({"avx2", "fma"}), "slower here (measured 0.58×"),
        (frozenset({"avx2", "avx512f"}), "about the same decode speed as llama.cpp (measured 1.02×"),
        (frozenset({"avx", "sse4_2"}), "never measured on a CPU without AVX2"),
    ],
)
def test_openvino_on_the_cpu_is_judged_by_what_was_measured_on_such_a_cpu(flags: frozenset[str], phrase: str) -> None:
    reason = openvino_cpu_reason(flags)
    assert reason.startswith("available") and phrase in reason


@pytest.mark.parametrize(
    ("machine", "backend", "reason"),
    [
        (make_inventory(), "cuda", "no NVIDIA GPU found"),
        (make_inventory(gpus=(("RTX 4070", 12, 11),), cuda=False), "cuda", "this llama.cpp build has no CUDA support"),
        (make_inventory(gpu_problem="its driver did not answer"), "cuda", "its driver did not answer"),
        (make_inventory(gpus=(("RTX 4070", 12, 11),)), "cuda", None),
        (make_inventory(), "openvino", "OpenVINO GenAI is not installed"),
        (make_inventory(openvino=EPYC), "openvino", None),
        (make_inventory(llama=False), "llamacpp", "llama-cpp-python is not installed"),
        (make_inventory(), "llamacpp", None),
        (make_inventory(), "auto", None),
    ],
)
def test_backends_that_cannot_run_here_say_why(machine: HardwareInventory, backend: str, reason: str | None) -> None:
    assert unavailable_backend_reason(machine, backend) == reason
