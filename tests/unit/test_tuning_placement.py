"""Where a tuning run trains (models/tuning/placement.py): the GPU whole, the GPU with streamed layers, or the CPU,
as arithmetic over the model's shapes and the GPU's free memory."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.shared.errors import DoesNotFit
from models.tuning.placement import SMALLEST_WINDOW, GpuRoom, choose_placement
from models.tuning.plan import layer_parameters, plan_gpu_training
from tests.unit.test_tuning_plan import OPTIONS, SMOL

GIB = 1 << 30


def room(free_bytes: int, bf16: bool = True) -> GpuRoom:
    return GpuRoom("Test GPU", free_bytes, bf16)


def test_without_a_gpu_or_when_the_cpu_is_asked_for_the_run_stays_on_the_cpu() -> None:
    assert choose_placement(SMOL, OPTIONS, 512, None).where == "cpu"
    on_cpu = choose_placement(SMOL, OPTIONS, 512, room(80 * GIB), "cpu")
    assert on_cpu.where == "cpu" and on_cpu.describe() == "on the CPU"


def test_a_roomy_gpu_takes_the_whole_model_in_bfloat16_as_asked() -> None:
    placement = choose_placement(SMOL, OPTIONS, 512, room(80 * GIB))
    assert placement.where == "gpu" and placement.window is None and placement.dtype == "bfloat16"
    assert not placement.gradient_checkpointing
    assert placement.plan.weights_bytes == SMOL.parameters * 2
    assert placement.describe() == "on Test GPU (bfloat16, all 30 layers on the GPU)"


def test_a_gpu_without_bfloat16_trains_in_float32() -> None:
    placement = choose_placement(SMOL, OPTIONS, 512, room(80 * GIB, bf16=False))
    assert placement.dtype == "float32" and placement.plan.weights_bytes == SMOL.parameters * 4


def test_checkpointing_is_turned_on_before_layers_are_streamed() -> None:
    whole = plan_gpu_training(SMOL, OPTIONS, 2, 512, 2, None)
    checkpointed = plan_gpu_training(SMOL, replace(OPTIONS, gradient_checkpointing=True), 2, 512, 2, None)
    between = (whole.total_bytes + checkpointed.total_bytes) // 2
    placement = choose_placement(SMOL, OPTIONS, 512, room(int(between / 0.9)))
    assert placement.window is None and placement.gradient_checkpointing
    assert "gradient checkpointing turned on" in placement.describe()


def test_a_model_too_big_for_the_gpu_streams_as_many_layers_as_fit() -> None:
    checkpointed = replace(OPTIONS, gradient_checkpointing=True)
    two = plan_gpu_training(SMOL, checkpointed, 2, 512, 2, SMALLEST_WINDOW)
    room_for_five = two.total_bytes + 3 * layer_parameters(SMOL) * 2 + 1000
    placement = choose_placement(SMOL, OPTIONS, 512, room(int(room_for_five / 0.9) + 1))
    assert placement.window == 5 and placement.gradient_checkpointing
    assert placement.plan.total_bytes <= room_for_five
    assert placement.plan.weights_bytes < SMOL.parameters * 2
    assert "5 of 30 layers on the GPU at a time" in placement.describe()


def test_a_gpu_that_holds_not_even_two_layers_leaves_the_run_to_the_cpu_and_says_why() -> None:
    placement = choose_placement(SMOL, OPTIONS, 512, room(64 << 20))
    assert placement.where == "cpu"
    assert "Test GPU has too little free memory" in placement.describe()


def test_when_the_gpu_was_asked_for_and_nothing_fits_the_run_is_refused_with_what_to_do() -> None:
    with pytest.raises(DoesNotFit) as raised:
        choose_placement(SMOL, OPTIONS, 512, room(64 << 20), "gpu")
    assert "Even 2 layers at a time do not fit on Test GPU" in raised.value.message
    assert "train on the CPU" in raised.value.remedy


def test_the_window_never_reaches_the_whole_stack() -> None:
    # Room for all layers streamed but not for the whole model resident (the logits of a long batch take it).
    options = replace(OPTIONS, batch_size=8)
    resident = plan_gpu_training(SMOL, replace(options, gradient_checkpointing=True), 8, 512, 2, None)
    placement = choose_placement(SMOL, options, 512, room(int((resident.total_bytes - 1) / 0.9)))
    assert placement.window is not None and placement.window < SMOL.layers


def test_the_page_plans_on_the_gpu_nvml_lists_when_torch_is_a_cuda_build(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from app.services.training.tuning import gpu_room
    from tests.helpers import make_inventory

    machine = make_inventory(gpus=(("NVIDIA RTX 4090", 24.0, 20.0),))
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.13.0")
    assert gpu_room(machine, OPTIONS) == GpuRoom("NVIDIA RTX 4090", 20 * GIB, True)
    assert gpu_room(machine, replace(OPTIONS, gpu_memory_mib=4096)) == GpuRoom("NVIDIA RTX 4090", 4 * GIB, True)
    assert gpu_room(machine, replace(OPTIONS, device="cpu")) is None
    assert gpu_room(make_inventory(), OPTIONS) is None
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.13.0+cpu")
    assert gpu_room(machine, OPTIONS) is None  # a CPU build of torch cannot train there


def test_the_memory_line_says_when_the_run_would_train_on_the_gpu() -> None:
    from app.ui.tuning_view import memory_summary

    line = memory_summary(300 << 20, 20 * GIB, "300 MB: …", on_gpu="on NVIDIA RTX 4090 (bfloat16, all 30 layers)")
    assert line.startswith("**GPU memory**: it trains on NVIDIA RTX 4090 (bfloat16, all 30 layers)")
    assert line.endswith("of GPU memory is free now: it fits.")
    assert memory_summary(300 << 20, 1 << 20, "300 MB").startswith("**Memory**: about 300 MB.")


def test_a_memory_cap_holds_the_room_below_what_is_free_and_no_cap_leaves_it() -> None:
    assert GpuRoom.capped("H200", 80 << 30, True, 2048).free_bytes == 2048 << 20
    assert GpuRoom.capped("H200", 1 << 30, True, 2048).free_bytes == 1 << 30
    assert GpuRoom.capped("H200", 80 << 30, False, None) == GpuRoom("H200", 80 << 30, False)
