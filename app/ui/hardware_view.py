"""Pure functions for the Hardware tab: the machine, the plan with its reasons, and a memory bar per device."""

from __future__ import annotations

import html

from backends import registry
from backends.hardware import HardwareInventory, describe
from backends.memory import format_bytes
from backends.plan import BackendPlan, Placement

BACKEND_CHOICES = [(choice.label, choice.name) for choice in registry.choices(offered=True)]


def backend_choices(inventory: HardwareInventory, paired_workers: int = 0) -> list[tuple[str, str]]:
    """The backend picker: a backend that cannot run here keeps its place, labelled with the reason."""
    choices = []
    for choice in registry.choices(offered=True):
        reason = registry.unavailable_reason(inventory, choice.name)
        if choice.uses_workers and not reason and not paired_workers:
            reason = "no worker is paired (pair one under Workers)"
        label = choice.label
        choices.append((f"{label} — not available here: {reason}" if reason else label, choice.name))
    return choices


def device_choices(inventory: HardwareInventory) -> list[tuple[str, str]]:
    choices = [("Automatic", "auto"), ("CPU", "cpu")]
    choices += [(f"{gpu.name} ({gpu.id})", gpu.id) for gpu in inventory.gpus]
    choices += [
        (f"{device.full_name} (OpenVINO {device.id})", device.id)
        for device in inventory.openvino or ()
        if device.accelerator
    ]
    return choices


def inventory_markdown(inventory: HardwareInventory, as_of: str = "") -> str:
    """The machine, one line per device; ``as_of`` (a clock time) says when free memory was read."""
    shown, hidden = [], []
    for line in describe(inventory):
        if line.startswith("CPU:") and "; ISA: " in line:  # the instruction sets are for bug reports: under Details
            line, isa = line.split("; ISA: ", 1)
            hidden.append(f"Instruction sets of the CPU: {isa}")
        if line.startswith("llama.cpp: "):  # the library's version and build, likewise
            hidden.append(line)
            continue
        shown.append(line)
    lines = [f"- {html.escape(line)}" for line in shown]
    if as_of:
        lines = [f"{line} (as of {html.escape(as_of)})" if line.startswith("- RAM:") else line for line in lines]
    lines += [f"- note: {html.escape(note)}" for note in inventory.notes]
    listed = "\n".join(f"- {html.escape(line)}" for line in hidden)
    details = f"\n\n<details><summary>Details</summary>\n\n{listed}\n\n</details>" if hidden else ""
    return "### This computer\n" + "\n".join(lines) + details


def switch_progress_text(message: str, elapsed_s: int) -> str:
    """One step of a switch with the seconds it has taken so far (a compile reports nothing for a while)."""
    return f"{message.rstrip('.…')}… {elapsed_s} s"


def memory_bar_html(placement: Placement) -> str:
    """One device: a bar of what the model takes of what was available there when the plan was made (before the
    model loaded: the page's memory line, read now, is lower by about the model), split into weights / cache /
    scratch."""
    free = max(placement.available_bytes, 1)
    memory = placement.memory
    parts = [
        ("weights", memory.weights_bytes, "#e8743b"),
        ("context cache", memory.kv_cache_bytes, "#f5b041"),
        ("working memory", memory.compute_bytes, "#aab7b8"),
    ]
    segments = "".join(
        f'<div title="{label}: {format_bytes(size)}" style="width:{min(100.0, 100 * size / free):.2f}%;'
        f'background:{color};height:100%"></div>'
        for label, size, color in parts
    )
    layers = f"{placement.layers} layers · " if placement.layers else ""
    caption = (
        f"<b>{html.escape(str(placement.device))}</b> {html.escape(placement.name)} — {layers}"
        f"{format_bytes(memory.total_bytes)} of the {format_bytes(placement.available_bytes)} that was available "
        "when the plan was made (the memory line above is read now)"
    )
    return (
        f'<div class="memory-bar" data-device="{html.escape(str(placement.device))}" style="margin:6px 0">'
        f"<div>{caption}</div>"
        '<div style="display:flex;height:12px;border:1px solid var(--border-color-primary);border-radius:4px;'
        f'overflow:hidden">{segments}</div></div>'
    )


def plan_html(plan: BackendPlan | None, message: str, slots: int = 1) -> str:
    """The plan the model runs on: where, the memory it takes, why; with its threads and how many answers it writes
    at once (``slots``), which the page's header leaves out."""
    if plan is None:
        return f"<p>{html.escape(message)}</p>"
    bars = "".join(memory_bar_html(p) for p in plan.placements)
    # Why this backend, in a line; the rest (each route not taken, threads, context, the cache) under Details.
    headline, *details = plan.reasons or ("",)
    reasons = "".join(f"<li>{html.escape(reason)}</li>" for reason in details)
    legend = (
        '<p style="font-size:0.85em">bars: <span style="color:#e8743b">■</span> weights '
        '<span style="color:#f5b041">■</span> context cache <span style="color:#aab7b8">■</span> working memory</p>'
    )
    return (
        f'<h3>Running on {html.escape(plan.label)}</h3><p id="plan-shape">{_shape(plan, slots)}</p>'
        f'<div id="plan-bars">{bars}</div>{legend}'
        f'<p id="plan-why">{html.escape(headline)}</p>'
        f'<details id="plan-details"><summary>Details: every other route, threads, context, cache</summary>'
        f'<ul id="plan-reasons">{reasons}</ul></details>'
    )


def _shape(plan: BackendPlan, slots: int) -> str:
    answers = f"up to {slots} answers at once" if slots > 1 else "one answer at a time"
    return f"{plan.threads} threads · context {plan.context_length:,} tokens · {answers}"
