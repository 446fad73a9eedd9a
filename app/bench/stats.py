"""The spread of repeated benchmark runs. A benchmark on a shared machine that prints one median hides that the
same command gave 0.57 once and 3.76 the next time; every ratio Hearth's benchmarks print comes with its
spread over the runs, each run's ratio taken against the raw engine in the same round."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Runs whose ratios range wider than this share of their median are called noisy.
NOISY_RELATIVE_RANGE = 0.2


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    q1: float  # the interquartile range: the middle half of the runs lies in q1..q3
    q3: float
    runs: int

    @property
    def relative_range(self) -> float:
        """(max - min) / median; infinite when the median is 0."""
        return (self.high - self.low) / abs(self.median) if self.median else float("inf")

    @property
    def noisy(self) -> bool:
        return self.runs > 1 and self.relative_range > NOISY_RELATIVE_RANGE

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("no runs to summarise")
    ordered = sorted(values)
    if len(ordered) == 1:
        q1 = q3 = ordered[0]
    else:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return Spread(float(statistics.median(ordered)), ordered[0], ordered[-1], q1, q3, len(ordered))


def paired_ratios(hearth: Sequence[float], raw: Sequence[float]) -> list[float]:
    """Each round's Hearth value over the raw engine's value in the same round (rounds with no raw value are
    left out: a ratio against nothing means nothing)."""
    return [h / r for h, r in zip(hearth, raw, strict=True) if r > 0]


def format_spread(value: Spread) -> str:
    if value.runs == 1:
        return f"{value.median:.2f} (one run: no spread; use more runs)"
    return (
        f"{value.median:.2f} (min–max {value.low:.2f}–{value.high:.2f}, IQR {value.q1:.2f}–{value.q3:.2f}, "
        f"{value.runs} runs)"
    )


def noise_warning(value: Spread, what: str) -> str | None:
    """A line to print when the runs disagree too much for the median to be trusted."""
    if not value.noisy:
        return None
    return (
        f"warning: {what} varies by {value.relative_range:.0%} of its median across runs (more than "
        f"{NOISY_RELATIVE_RANGE:.0%}): something else was using this machine. Close other programs and run "
        "again with more --runs before trusting the median."
    )


def spread_lines(rows: Sequence[tuple[str, Mapping[str, Any] | None]], width: int, unmeasured: str) -> list[str]:
    """One indented line per labelled spread (``None``: ``unmeasured``), then a noise warning for each noisy one."""
    lines: list[str] = []
    warnings: list[str] = []
    for label, fields in rows:
        if fields is None:
            lines.append(f"  {label:<{width}}{unmeasured}")
            continue
        value = Spread(**fields)
        lines.append(f"  {label:<{width}}{format_spread(value)}")
        warning = noise_warning(value, f"the {label} ratio")
        if warning:
            warnings.append(warning)
    return lines + warnings


def summarise(values: Sequence[float]) -> dict[str, float | int]:
    """A benchmark script's figure as it is written to its JSON file: median, min, max, quartiles and runs."""
    return spread(values).as_dict()


def report(result: Mapping[str, Any], json_path: Path | None = None) -> None:
    """Print a benchmark script's result without its per-run rows, and write all of it to ``json_path`` if given."""
    import json

    print(json.dumps({key: value for key, value in result.items() if key != "rows"}, indent=1))
    if json_path is not None:
        json_path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
