"""Reading passages ahead (``app.services.answering.warming``): which passages fit the kept caches' room, when the
settings would keep nothing (refused with the setting to change), when the computer runs on its battery, and the
time left."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from app.services.answering.warming import (
    ROOM_SHARE,
    WarmProgress,
    on_battery,
    room_tokens,
    warming_plan,
)
from app.settings import load_settings
from models.gguf import read_model_info
from rag.prompt import Source


def passage(n: int) -> Source:
    return Source(1, f"file-{n}.md", None, None, f"passage {n}")


def test_passages_are_planned_in_order_while_they_fit() -> None:
    passages = [passage(n) for n in range(4)]
    assert warming_plan(passages, [100, 200, 300, 50], 600) == passages[:3]
    assert warming_plan(passages, [100, 200, 300, 50], 650) == passages
    assert warming_plan(passages, [700, 10, 10, 10], 600) == []  # not past one that does not fit: order is priority
    assert warming_plan([], [], 600) == []


def test_the_room_is_the_disk_cap_or_else_memory_s_at_the_kept_width(tmp_path: Path, embedded_model: Path) -> None:
    model = read_model_info(embedded_model)
    values = model.head_count_kv * (model.head_dim_k + model.head_dim_v)  # of a token, in one layer
    per_token = {"f16": model.block_count * values * 2, "q8_0": model.block_count * values * 34 // 32}
    assert room_tokens(model, load_settings(home=tmp_path)) == int((512 << 20) * ROOM_SHARE) // per_token["q8_0"]
    f16 = load_settings(home=tmp_path, backend={"passage_cache_type": "f16"})
    assert room_tokens(model, f16) == int((512 << 20) * ROOM_SHARE) // per_token["f16"]
    memory = load_settings(home=tmp_path, backend={"passage_cache_mb": 0})
    assert room_tokens(model, memory) == int((256 << 20) * ROOM_SHARE) // per_token["q8_0"]


def test_the_terminal_refuses_reading_ahead_where_nothing_would_be_kept(tmp_path: Path) -> None:
    from app.cli.documents import _check_read_ahead
    from models.shared.errors import HearthError

    _check_read_ahead(load_settings(home=tmp_path, backend={"slots": 4}))
    with pytest.raises(HearthError) as off:
        _check_read_ahead(load_settings(home=tmp_path, rag={"keep_passages": False}))
    assert "keeping passages is off" in str(off.value) and "HEARTH_RAG__KEEP_PASSAGES=true" in off.value.remedy


@pytest.mark.parametrize(
    ("battery", "expected"),
    [
        (None, False),  # no battery: a desktop
        (SimpleNamespace(percent=80, power_plugged=True), False),
        (SimpleNamespace(percent=80, power_plugged=False), True),
        (SimpleNamespace(percent=80, power_plugged=None), False),  # cannot be told
    ],
)
def test_on_battery_only_when_it_says_it_is_unplugged(battery: object, expected: bool) -> None:
    assert on_battery(lambda: battery) is expected


def test_a_probe_that_fails_is_not_a_battery() -> None:
    def broken() -> object:
        raise OSError("no power supply class")

    assert on_battery(broken) is False


def test_the_time_left_is_the_pace_so_far() -> None:
    assert WarmProgress(0, 10, 0, 0.0).eta_s is None
    assert WarmProgress(2, 10, 0, 3.0).eta_s == pytest.approx(12.0)
    assert WarmProgress(10, 10, 4, 15.0).eta_s == 0
