"""Tuning settings: two presets, and every setting out of range refused with a usual value to use instead."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.shared.errors import TuningError
from models.tuning.options import ALL_TARGETS, ATTENTION, PRESETS, TuneOptions, check_options, preset, total_steps


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_valid(name: str) -> None:
    assert check_options(PRESETS[name]) is PRESETS[name]  # type: ignore[index]


def test_quick_is_a_smaller_adapter_on_every_layer_that_learns_faster() -> None:
    # One pass on the attention layers alone taught no style from a dozen examples (bench/tuning_presets.py).
    quick, standard = PRESETS["quick"], PRESETS["standard"]
    assert quick.rank < standard.rank
    assert quick.targets == ALL_TARGETS != ATTENTION
    assert quick.learning_rate > standard.learning_rate
    assert quick.epochs >= 3


def test_preset_changes_ignore_none() -> None:
    changed = preset("quick", rank=32, learning_rate=None, max_steps=None, epochs=2.0)
    assert changed == replace(PRESETS["quick"], rank=32, epochs=2.0)
    assert changed.learning_rate == PRESETS["quick"].learning_rate
    assert changed.max_steps is None


def test_preset_changes_are_checked() -> None:
    with pytest.raises(TuningError, match="rank of 0"):
        preset("standard", rank=0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rank": 0}, "rank of 0"),
        ({"rank": 10**6}, "rank of 1000000"),
        ({"alpha": 0}, "alpha of 0"),
        ({"learning_rate": float("nan")}, "learning rate of nan"),
        ({"learning_rate": float("inf")}, "learning rate of inf"),
        ({"learning_rate": 0.0}, "learning rate of 0.0"),
        ({"learning_rate": -1e-4}, "learning rate of -0.0001"),
        ({"learning_rate": 0.5}, "learning rate of 0.5"),
        ({"epochs": 0.0}, "0.0 epochs"),
        ({"epochs": float("nan")}, "nan epochs"),
        ({"max_steps": 0}, "0 steps"),
        ({"max_length": 8}, "max length of 8"),
        ({"max_length": 10**6}, "max length of 1000000"),
        ({"batch_size": 0}, "batch of 0"),
        ({"targets": ()}, "No layers"),
        ({"targets": ("q_proj", "lm_head", "wq")}, "Unknown layer names: lm_head, wq"),
        ({"save_every": 0}, "at least one step apart"),
    ],
)
def test_out_of_range_settings_are_refused_with_a_remedy(change: dict[str, object], message: str) -> None:
    options = replace(TuneOptions(), **change)  # type: ignore[arg-type]
    with pytest.raises(TuningError) as caught:
        check_options(options)
    assert message in caught.value.message
    assert caught.value.remedy.strip()


@pytest.mark.parametrize(
    "change",
    [{"rank": 1}, {"rank": 512}, {"learning_rate": 0.1}, {"max_length": 16}, {"batch_size": 256}, {"max_steps": 1}],
)
def test_limits_themselves_are_allowed(change: dict[str, object]) -> None:
    options = replace(TuneOptions(), **change)  # type: ignore[arg-type]
    assert check_options(options) == options


@pytest.mark.parametrize(
    ("examples", "batch", "epochs", "steps"),
    [
        (10, 4, 3.0, 9),  # 3 batches an epoch (the last short)
        (8, 4, 3.0, 6),
        (10, 4, 0.5, 2),  # half of 3 batches, rounded up
        (1, 4, 1.0, 1),
        (0, 4, 1.0, 1),  # never fewer than one step
        (100, 1, 0.01, 1),
    ],
)
def test_total_steps_from_epochs(examples: int, batch: int, epochs: float, steps: int) -> None:
    assert total_steps(TuneOptions(batch_size=batch, epochs=epochs), examples) == steps


def test_max_steps_wins_over_epochs() -> None:
    assert total_steps(TuneOptions(batch_size=4, epochs=3.0, max_steps=5), 1000) == 5
    assert total_steps(TuneOptions(batch_size=4, epochs=3.0, max_steps=50), 10) == 50


def test_the_device_and_gpu_memory_cap_are_checked_and_described() -> None:
    on_gpu = check_options(replace(TuneOptions(), device="gpu", gpu_memory_mib=4096))
    assert on_gpu.describe().endswith(", on the GPU, at most 4096 MiB of GPU memory")
    assert "GPU" not in TuneOptions().describe()
    with pytest.raises(TuningError, match="Unknown device 'tpu'"):
        check_options(replace(TuneOptions(), device="tpu"))  # type: ignore[arg-type]
    with pytest.raises(TuningError, match="GPU memory cap of 16 MiB"):
        check_options(replace(TuneOptions(), gpu_memory_mib=16))
