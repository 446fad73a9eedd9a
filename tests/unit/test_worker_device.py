"""`hearth worker --device`: which of llama.cpp's devices a spelling names, and what a worker says of its speed."""

from __future__ import annotations

import pytest

from app.cli.worker import _speed_line
from backends.workers.device import DEVICE_CPU, DEVICE_GPU, BadDevice, ServableDevice, pick_device

CPU = ServableDevice("CPU", "Intel(R) Xeon(R) Platinum", DEVICE_CPU, 0, 0)
H100 = ServableDevice("CUDA0", "NVIDIA H100 80GB HBM3", DEVICE_GPU, 80 << 30, 80 << 30)
L4 = ServableDevice("CUDA1", "NVIDIA L4", DEVICE_GPU, 22 << 30, 24 << 30)
VULKAN = ServableDevice("Vulkan0", "Intel Arc", DEVICE_GPU, 0, 0)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("cpu", CPU), (" CPU ", CPU), ("cuda:0", H100), ("CUDA:1", L4)],
)
def test_a_spelling_names_the_cpu_or_the_nth_cuda_device(spec: str, expected: ServableDevice) -> None:
    assert pick_device(spec, (CPU, VULKAN, H100, L4)) == expected


def test_a_gpu_without_cuda_is_not_a_cuda_device_and_the_build_is_named_as_the_reason() -> None:
    with pytest.raises(BadDevice) as caught:
        pick_device("cuda:0", (CPU, VULKAN))
    assert caught.value.message == "There is no cuda:0 here: this llama.cpp has no CUDA device (it lists CPU, Vulkan0)."
    assert "make setup" in caught.value.remedy and "--device cpu" in caught.value.remedy


def test_an_index_past_the_last_gpu_lists_those_there_are() -> None:
    with pytest.raises(BadDevice) as caught:
        pick_device("cuda:2", (CPU, H100, L4))
    assert "2 CUDA device(s), cuda:0 (NVIDIA H100 80GB HBM3), cuda:1 (NVIDIA L4)" in caught.value.message
    assert caught.value.remedy == "Use --device cuda:0 to cuda:1."


@pytest.mark.parametrize("spec", ["gpu", "cuda", "cuda:-1", "cuda:x", "npu:0", ""])
def test_other_spellings_are_refused_with_the_two_that_work(spec: str) -> None:
    with pytest.raises(BadDevice) as caught:
        pick_device(spec, (CPU, H100))
    assert caught.value.message == f"Unknown device {spec!r}."
    assert "--device cpu" in caught.value.remedy and "cuda:N" in caught.value.remedy


def test_mains_read_a_gpu_label_as_a_gpu_and_a_cpu_label_as_a_cpu() -> None:
    assert H100.label == "GPU CUDA0: NVIDIA H100 80GB HBM3"
    assert CPU.label.startswith("CPU")  # the planner's "slower than alone" reads CPU workers by this


def test_a_worker_says_where_its_speed_figure_comes_from() -> None:
    assert _speed_line(False, 15.7e9).startswith("Memory reads at 15.7 GB/s with its threads")
    assert _speed_line(True, 3.35e12).startswith("Memory reads at up to 3350 GB/s (the GPU's peak, per its driver")
    assert "mean of the others" in _speed_line(True, 0.0)
