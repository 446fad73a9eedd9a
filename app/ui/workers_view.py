"""Pure functions for the Workers part of the Hardware tab: one row per paired worker, as asked just now."""

from __future__ import annotations

import html
from collections.abc import Sequence

from app.services.workers import WorkerStatus
from backends.memory import format_bytes
from models.shared.wording import format_bits_per_s, format_read_speed

NONE_PAIRED = (
    "<p class='workers-none'>No worker is paired. A worker lends this chat another computer's memory and cores: "
    "start Hearth's worker on that computer (in its terminal: <code>hearth worker --host ADDRESS</code>, with "
    "ADDRESS that computer's address on your network), then type below the address and the pairing code it "
    "shows.</p>"
)


def workers_html(statuses: Sequence[WorkerStatus], as_of: str = "") -> str:
    """A table of the paired workers: address, state (with the problem when offline), device, free memory, threads
    and memory read speed, round trip, versions."""
    if not statuses:
        return NONE_PAIRED
    rows = []
    for status in statuses:
        worker, facts = status.worker, status.worker.facts
        if status.online:
            state = "<span class='worker-online'>online</span>"
            trip = f"{status.round_trip_ms:.2f} ms" if status.round_trip_ms is not None else "–"
            if status.bandwidth_bytes_per_s:
                trip += f" · {format_bits_per_s(status.bandwidth_bytes_per_s)}"
        else:
            state = f"<span class='worker-offline'>offline</span>: {html.escape(status.problem)}"
            trip = "–"
        cells = (
            f"<code>{html.escape(worker.address)}</code>",
            state,
            html.escape(facts.device),
            format_bytes(facts.free_bytes) if status.online else "–",
            f"{facts.threads} · {format_read_speed(facts.read_bytes_per_s)}",
            trip,
            html.escape(f"Hearth {facts.hearth_version}, llama.cpp {facts.llama_cpp_version}"),
        )
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    head = "".join(
        f"<th>{name}</th>" for name in ("Worker", "State", "Device", "Free memory", "Threads", "Link", "Versions")
    )
    when = f"<p class='workers-as-of'>Asked at {html.escape(as_of)}.</p>" if as_of else ""
    return f"<table class='workers'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{when}"


def pair_note(address: str, device: str, free_bytes: int, round_trip_ms: float, bytes_per_s: float) -> str:
    return (
        f"Paired with the worker at `{address}` ({device}, {format_bytes(free_bytes)} free, round trip "
        f"{round_trip_ms:.2f} ms, {format_bits_per_s(bytes_per_s)}). Pick **Split across the paired workers** above "
        "to use it."
    )
