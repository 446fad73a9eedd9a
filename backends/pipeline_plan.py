"""The pipelined plan: one model's decoder layers split by whole ranges across `hearth worker` processes (llama.cpp's
RPC devices), the rest of the run (the threads, the context, the answers at once) as llama.cpp's CPU plan has it.

Pure. This plan splits the layers evenly, in the order the workers were given, and says what the links cost per
token (``backends/pipeline_cost.py``) and when the split will be slower than this machine alone; weighing each
worker's free memory and speed, and keeping a share on the local device, are still to come.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from backends.pipeline_cost import LinkFacts, network_ms_per_token, slower_than_alone
from backends.selection import BackendPlan, Placement
from models.gguf import ModelInfo

UNMEASURED = 0  # a worker's free memory, until pairing measures it


def layer_ranges(layers: int, workers: int) -> list[range]:
    """``layers`` split into ``workers`` consecutive ranges, as even as whole layers allow (the first get one more)."""
    if workers < 1:
        raise ValueError("at least one worker")
    each, extra = divmod(layers, workers)
    ranges, start = [], 0
    for index in range(workers):
        count = each + (1 if index < extra else 0)
        ranges.append(range(start, start + count))
        start += count
    return ranges


def pipeline_plan(
    cpu_plan: BackendPlan, model: ModelInfo, workers: Sequence[str], links: Sequence[LinkFacts] = ()
) -> BackendPlan:
    """``cpu_plan`` (llama.cpp on this CPU) with every layer on the ``workers`` instead; ``links`` are what pairing
    measured (matched by address; a worker without one is counted as an unmeasured CPU)."""
    ranges = layer_ranges(model.block_count, len(workers))
    placements = tuple(
        Placement(f"RPC {worker}", f"hearth worker at {worker}", len(held), cpu_plan.memory, UNMEASURED)
        for worker, held in zip(workers, ranges, strict=True)
    )
    held_lines = tuple(
        f"layers {held.start}-{held.stop - 1} on the worker at {worker}" if len(held) else f"no layer on {worker}"
        for worker, held in zip(workers, ranges, strict=True)
    )
    label = f"llama.cpp split across {len(workers)} worker{'s' if len(workers) != 1 else ''}"
    by_address = {link.address: link for link in links}
    measured = [by_address.get(worker, LinkFacts(0.0, 0.0, worker)) for worker in workers]
    network_ms = network_ms_per_token(measured, model.vocab_size, model.embedding_length)
    warning = slower_than_alone(network_ms, fits_here=True, devices=[link.device for link in measured])
    cost_line = warning or f"each token also waits about {network_ms:.1f} ms on the links"
    return dataclasses.replace(
        cpu_plan,
        label=label,
        devices=tuple(f"RPC {worker}" for worker in workers),
        reasons=(f"{label}: chosen by you", *held_lines, cost_line, *cpu_plan.reasons[1:]),
        placements=placements,
        gpu_layers=-1,  # every layer on the workers' devices
        tensor_split=tuple(float(len(held)) for held in ranges),
        workers=tuple(workers),
        device="",
    )
