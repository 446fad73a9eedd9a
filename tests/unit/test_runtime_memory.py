"""A plan is made with the memory free when it is made, not the figure read at start-up."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.services.serving.model_handles import ModelChoice
from app.services.serving.runtime import ModelRuntime
from backends import registry
from backends.hardware import HardwareInventory
from backends.plan import Preferences
from models.shared.errors import DoesNotFit
from tests.helpers import make_inventory, write_tiny_gguf


def test_each_plan_reads_free_memory_again(tmp_path: Path) -> None:
    choice = ModelChoice(
        write_tiny_gguf(tmp_path / "m.gguf", context_length=1_000_000), Preferences(context_length=1_000_000)
    )
    at_start = make_inventory(ram_available_gib=64)
    free_now = [64.0]

    def current(inventory: HardwareInventory) -> HardwareInventory:
        return dataclasses.replace(inventory, ram_available_bytes=int(free_now[0] * (1 << 30)))

    runtime = ModelRuntime(at_start, registry.AUTOMATIC, registry.ALL, current_inventory=current)
    _, plan = runtime.plan(choice)
    assert plan.placements[0].available_bytes == 64 << 30
    free_now[0] = 0.5  # other programs took the memory since Hearth started
    with pytest.raises(DoesNotFit):
        runtime.plan(choice)
    assert ModelRuntime(at_start, registry.AUTOMATIC, registry.ALL).plan(choice)[1].backend == "llamacpp"
