"""Pure functions for the Hardware tab's Benchmark part: the pipeline bench's summary (``hearth bench pipeline
--json``) as a table, and its progress line."""

from __future__ import annotations

import html
from typing import Any

COLUMNS = (
    ("plan", "Plan"),
    ("users", "Users"),
    ("aggregate_tokens_per_s", "Tokens/s (all users)"),
    ("ms_per_token_p50", "ms/token p50"),
    ("ms_per_token_p95", "p95"),
    ("first_token_ms_p50", "First token ms"),
    ("bytes_per_token", "Bytes/token"),
    ("joules_per_token", "J/token"),
)


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key in ("plan",):
        return html.escape(str(value))
    if key == "users":
        return str(int(value))
    if key == "joules_per_token":
        return f"{float(value):.3f}"
    if key in ("first_token_ms_p50", "bytes_per_token"):
        return f"{float(value):,.0f}"
    return f"{float(value):.1f}"


def summary_html(summary: dict[str, Any], when: str = "") -> str:
    """The bench's rows, the load times, the ratios for one user with their spread, and what it says of energy."""
    head = "".join(f"<th>{title}</th>" for _, title in COLUMNS)
    rows = "".join(
        "<tr>" + "".join(f"<td>{_cell(key, row.get(key))}</td>" for key, _ in COLUMNS) + "</tr>"
        for row in summary.get("rows", [])
    )
    facts = [
        f"Model {html.escape(str(summary.get('model', '?')))}, {summary.get('threads', '?')} threads in the engine, "
        f"{summary.get('max_tokens', '?')} tokens per answer, two workers on this machine (loopback); medians over "
        "rounds." + (f" Measured at {html.escape(when)}." if when else "")
    ]
    loads = summary.get("load_s") or {}
    if loads:
        facts.append("Load: " + ", ".join(f"{html.escape(k)} {float(v):.1f} s" for k, v in loads.items()) + ".")
    for key, words in (("split_vs_one_process", "split / one process"), ("split_vs_llama_cpp_rpc", "split / raw RPC")):
        value = summary.get(key)
        if value:
            facts.append(
                f"{words}, 1 user: {value['median']:.2f}x (min {value['low']:.2f}, max {value['high']:.2f}, "
                f"{value['runs']} rounds)."
            )
    facts.append(f"Energy: {html.escape(str(summary.get('energy', '')))}.")
    notes = "".join(f"<p>{fact}</p>" for fact in facts)
    return f"<table class='bench'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{notes}"


def progress_text(line: str, elapsed_s: float) -> str:
    """A bench progress line ("bench: round 1 of 1: …") as the page shows it, with the seconds so far."""
    return f"{line.removeprefix('bench: ').strip()}… {elapsed_s:.0f} s"
