"""The tuning run's loss chart, drawn here as SVG (pure): its step axis shows whole steps only.

A chart component's automatic ticks cut a short run's axis into half steps ("2.5"), steps a run never takes, and
offer no way to ask for whole numbers. Drawn here, the ticks fall every 1, 2 or 5 × 10ⁿ steps, the axis spans the
steps the run will take (so the line grows towards its end), and the losses are read by the page's text colour in
light and dark themes alike. Only numbers reach the SVG, no text from a run or a file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

WIDTH, HEIGHT = 720, 270
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 44, 44
TRAINING_COLOUR = "#2563eb"
HELD_OUT_COLOUR = "#ea580c"
TITLE = "Loss (lower is better)"


def step_ticks(last: int, most: int = 10) -> list[int]:
    """Whole steps from 0 to at least ``last``, every 1, 2 or 5 × 10ⁿ steps, at most ``most`` + 1 of them."""
    span = max(last, 1)
    spacing = 1
    while span / spacing > most:
        spacing = _next_spacing(spacing)
    end = math.ceil(span / spacing) * spacing
    return list(range(0, end + 1, spacing))


def _next_spacing(spacing: int) -> int:
    """1 → 2 → 5 → 10 → 20 → 50 → …"""
    lead = spacing // 10 ** int(math.log10(spacing))
    return spacing * 5 // 2 if lead == 2 else spacing * 2


def value_ticks(low: float, high: float, most: int = 5) -> list[float]:
    """Round values from at or below ``low`` to at or above ``high``, every 1, 2 or 5 × 10ⁿ, about ``most`` apart."""
    if high <= low:
        low, high = low - 0.5, high + 0.5
    raw = (high - low) / most
    magnitude = 10 ** math.floor(math.log10(raw))
    spacing = next(f * magnitude for f in (1, 2, 5, 10) if f * magnitude >= raw)
    first, last = math.floor(low / spacing), math.ceil(high / spacing)
    return [round(i * spacing, 10) for i in range(first, last + 1)]


def _value_label(value: float, spacing: float) -> str:
    decimals = max(0, -math.floor(math.log10(spacing))) if spacing > 0 else 0
    return f"{value:.{decimals}f}"


def loss_chart_svg(
    training: Sequence[tuple[int, float]], held_out: Sequence[tuple[int, float]], total_steps: int
) -> str:
    """The chart of ``training`` (step, loss) and ``held_out`` (step, loss; step 0 is before training) over a run of
    ``total_steps``; empty before the first loss."""
    points = [*training, *held_out]
    if not points:
        return ""
    steps = step_ticks(max(total_steps, *(step for step, _ in points)))
    values = value_ticks(min(loss for _, loss in points), max(loss for _, loss in points))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(step: float) -> float:
        return LEFT + plot_w * step / steps[-1]

    def y(loss: float) -> float:
        return TOP + plot_h * (values[-1] - loss) / (values[-1] - values[0])

    spacing = values[1] - values[0]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="loss-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{TITLE}, by step" style="width:100%;max-width:{WIDTH + 80}px;height:auto" '
        'font-family="sans-serif" font-size="13" fill="currentColor">',
        f"<desc>{_description(training, held_out, total_steps)}</desc>",
        f'<text x="{LEFT}" y="18" font-weight="600">{TITLE}</text>',
        _legend(bool(training), bool(held_out)),
    ]
    for value in values:
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
            'stroke="currentColor" stroke-opacity="0.15"/>'
            f'<text class="loss-tick" x="{LEFT - 8}" y="{y(value) + 4:.1f}" text-anchor="end">'
            f"{_value_label(value, spacing)}</text>"
        )
    for step in steps:
        parts.append(
            f'<line x1="{x(step):.1f}" x2="{x(step):.1f}" y1="{TOP + plot_h}" y2="{TOP + plot_h + 5}" '
            'stroke="currentColor" stroke-opacity="0.5"/>'
            f'<text class="step-tick" x="{x(step):.1f}" y="{TOP + plot_h + 20}" text-anchor="middle">{step}</text>'
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 4}" text-anchor="middle">step</text>'
        f'<text transform="translate(14 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">loss</text>'
    )
    parts.append(_series(training, x, y, TRAINING_COLOUR, "training", dashed=False))
    parts.append(_series(held_out, x, y, HELD_OUT_COLOUR, "held-out", dashed=True))
    parts.append("</svg>")
    return "".join(parts)


def _series(
    points: Sequence[tuple[int, float]],
    x: Callable[[float], float],
    y: Callable[[float], float],
    colour: str,
    name: str,
    dashed: bool,
) -> str:
    if not points:
        return ""
    ordered = sorted(points)
    coordinates = " ".join(f"{x(step):.1f},{y(loss):.1f}" for step, loss in ordered)
    dash = ' stroke-dasharray="5 4"' if dashed else ""
    line = (
        f'<polyline class="series-{name}" points="{coordinates}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
    )
    # A lone point (one step, or the held-out loss measured once) is still seen; held-out points are few, each marked.
    marked = ordered if dashed or len(ordered) == 1 else []
    dots = "".join(f'<circle cx="{x(step):.1f}" cy="{y(loss):.1f}" r="3.5" fill="{colour}"/>' for step, loss in marked)
    return line + dots


def _legend(training: bool, held_out: bool) -> str:
    """A key for each series drawn, at the top right."""
    keys = [
        (name, colour, dash)
        for name, colour, dash, shown in (
            ("training", TRAINING_COLOUR, "", training),
            ("held-out", HELD_OUT_COLOUR, ' stroke-dasharray="5 4"', held_out),
        )
        if shown
    ]
    parts, right = [], WIDTH - RIGHT
    for name, colour, dash in reversed(keys):
        right -= 98
        parts.append(
            f'<line x1="{right}" x2="{right + 22}" y1="14" y2="14" stroke="{colour}" stroke-width="2"{dash}/>'
            f'<text x="{right + 28}" y="18">{name}</text>'
        )
    return "".join(parts)


def _description(training: Sequence[tuple[int, float]], held_out: Sequence[tuple[int, float]], total: int) -> str:
    """What the chart shows, in words, for a screen reader."""
    said = []
    if training:
        step, loss = max(training)
        said.append(f"training loss {loss:.3f} at step {step} of {max(total, step)}")
    if held_out:
        step, loss = max(held_out)
        said.append(f"held-out loss {loss:.3f} at step {step}")
    return "; ".join(said)
