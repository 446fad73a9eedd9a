"""The tuning run's loss chart: whole steps on its axis for any run length, and values that cover the losses."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET

import pytest

from app.ui.loss_chart import loss_chart_svg, step_ticks, value_ticks

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("last", [1, 2, 3, 5, 7, 10, 11, 19, 20, 25, 60, 99, 100, 101, 250, 999, 1000, 4321])
def test_step_ticks_are_whole_round_steps_that_reach_the_last(last: int) -> None:
    ticks = step_ticks(last)
    assert ticks[0] == 0 and ticks[-1] >= last
    assert 2 <= len(ticks) <= 11
    spacing = {b - a for a, b in itertools.pairwise(ticks)}
    assert len(spacing) == 1
    (every,) = spacing
    assert re.fullmatch(r"[125]0*", str(every)), every
    assert ticks[-1] - every < last  # no tick past the one that first reaches the last step


def test_a_short_run_has_a_tick_at_every_step() -> None:
    assert step_ticks(3) == [0, 1, 2, 3]


@pytest.mark.parametrize(("low", "high"), [(0.1, 3.2), (1.21, 1.48), (2.0, 2.0), (0.0031, 0.0042), (40.0, 950.0)])
def test_value_ticks_cover_the_losses_in_round_steps(low: float, high: float) -> None:
    ticks = value_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high
    assert 2 <= len(ticks) <= 12
    steps = [round(b - a, 9) for a, b in itertools.pairwise(ticks)]
    assert len(set(steps)) == 1


def parsed(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed, or this raises


def texts(root: ET.Element, cls: str) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == cls]


def test_the_chart_shows_whole_steps_over_the_planned_run_and_both_series() -> None:
    svg = loss_chart_svg([(1, 2.4), (2, 2.1), (3, 1.7)], [(0, 2.6), (3, 1.9)], total_steps=5)
    root = parsed(svg)
    assert texts(root, "step-tick") == ["0", "1", "2", "3", "4", "5"]
    losses = [float(t) for t in texts(root, "loss-tick")]
    assert losses[0] <= 1.7 and losses[-1] >= 2.6
    lines = {p.get("class"): p.get("points") for p in root.iter(f"{SVG}polyline")}
    assert set(lines) == {"series-training", "series-held-out"}
    assert len((lines["series-training"] or "").split()) == 3
    assert "training loss 1.700 at step 3 of 5" in svg and "held-out loss 1.900 at step 3" in svg


def test_before_the_first_loss_there_is_no_chart_and_one_point_is_still_drawn() -> None:
    assert loss_chart_svg([], [], total_steps=20) == ""
    svg = loss_chart_svg([(1, 3.0)], [], total_steps=20)
    assert "<circle" in svg and "held-out" not in svg
