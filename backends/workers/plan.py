"""The pipelined plan: one model's decoder layers split by whole ranges across `hearth worker` processes (llama.cpp's
RPC devices), the rest of the run (the threads, the context, the answers at once) as llama.cpp's CPU plan has it.

Pure. The workers hold the layers in proportion to their memory read speed as each measured it at its start (on a
CPU a layer's time is the time to read its weights, so equal times per stage keep a pipeline's stages busy), each at
most what its free memory holds; without speeds, in proportion to their free memory (a worker whose memory is not
known takes an even share); in the order they were given; this CPU holds the first layers when the workers
cannot hold them all (llama.cpp keeps the layers it does not offload first, on the CPU), so a model too large for
this machine alone runs. The plan says what the links cost per token (``backends/workers/cost.py``) and when the
split will be slower than this machine alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.errors import BackendUnavailable
from app.wording import plural
from backends.hardware import HardwareInventory
from backends.memory import (
    KV_WIDTHS,
    estimate_offload,
    format_bytes,
    layers_that_fit,
    split_layers,
    usable_bytes,
    weighted_split,
)
from backends.plan import CPU, BackendPlan, Placement, Preferences, in_layer_order, worker_device
from backends.workers.cost import FLOAT_BYTES, LinkFacts, network_ms_per_token, output_here, slower_than_alone
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


@dataclass(frozen=True)
class _Split:
    """How the layers fall: on each worker (in the order given), and the first ones on this CPU."""

    links: tuple[LinkFacts, ...]  # each worker's, in the order of the chain
    capacities: tuple[int, ...]  # the layers each worker's free memory holds (all of them when not measured)
    on_workers: tuple[int, ...]
    speeds: tuple[float, ...]  # the weights of the split: each worker's read speed; empty when none was measured
    keep_output: bool  # the output projection stays on this CPU
    local_layers: int
    local_capacity: int  # the layers this machine alone could hold


def pipeline_plan(
    inventory: HardwareInventory,
    model: ModelInfo,
    prefs: Preferences,
    context_length: int,
    threads: int,
) -> BackendPlan:
    """The layers on ``prefs.workers`` in proportion to their free memory (as pairing measured it), and on this CPU
    the first ones they cannot hold; refused, with what each device can hold, when they all cannot. The reasons are
    the split's own: the selection puts the choice, the threads, the context and the cache around them."""
    workers, slots, kv_width = prefs.workers, max(prefs.slots, 1), KV_WIDTHS[prefs.kv_cache_type]
    split = _split(inventory, model, prefs, context_length)
    local_layers, on_workers = split.local_layers, split.on_workers
    offload = estimate_offload(model, context_length, on_workers, slots, kv_width, output_here=split.keep_output)
    on_rpc = tuple(
        Placement(worker_device(worker), f"hearth worker at {worker}", count, memory, link.free_bytes or UNMEASURED)
        for worker, count, memory, link in zip(workers, on_workers, offload.gpus, split.links, strict=True)
    )
    here = Placement(CPU, inventory.cpu_model, local_layers, offload.cpu, inventory.ram_available_bytes)
    placements = in_layer_order((here, *on_rpc) if local_layers else on_rpc)
    label = f"llama.cpp split across {plural(len(workers), 'worker')}" + (" and this CPU" if local_layers else "")
    return BackendPlan(
        backend="llamacpp",
        label=label,
        threads=threads,
        context_length=context_length,
        memory=offload.cpu,
        reasons=tuple(_split_lines(model, placements, split)),
        placements=placements,
        output_on_cpu=split.keep_output,
        device="",
        slots=slots,
        kv_cache_type=prefs.kv_cache_type,
    )


def _split(inventory: HardwareInventory, model: ModelInfo, prefs: Preferences, context_length: int) -> _Split:
    """The layers on the workers, each at most what its free memory holds, and the first ones here; refused when
    no worker holds one, or when this machine cannot hold what the workers leave."""
    workers, slots, kv_width = prefs.workers, max(prefs.slots, 1), KV_WIDTHS[prefs.kv_cache_type]
    by_address = {link.address: link for link in prefs.worker_links}
    links = tuple(by_address.get(worker, LinkFacts(0.0, 0.0, worker)) for worker in workers)
    blocks = model.block_count
    # The output projection goes with the last layers (llama.cpp offloads it first), to the last worker, unless that
    # is a CPU: then it stays here, and only the hidden state crosses the network per token, not the logits.
    keep_output = output_here([links[-1].device])
    capacities = tuple(
        layers_that_fit(
            model,
            context_length,
            usable_bytes(link.free_bytes),
            slots=slots,
            kv_width=kv_width,
            with_output=not keep_output and index == len(links) - 1,
        )
        if link.free_bytes
        else blocks
        for index, link in enumerate(links)
    )
    speeds = worker_speeds(links)
    if not any(capacities):
        on_workers = tuple(0 for _ in workers)
    elif speeds:
        on_workers = weighted_split(blocks, capacities, speeds)
    else:
        on_workers = split_layers(blocks, capacities)
    if not any(on_workers):
        free = ", ".join(
            f"{worker}: {format_bytes(link.free_bytes)} free" for worker, link in zip(workers, links, strict=True)
        )
        raise BackendUnavailable(
            f"No worker has room for one of this model's layers with a {context_length}-token context ({free}).",
            "Free memory on a worker, or pair another; or run the model on this machine alone (backend auto).",
        )
    local_room = usable_bytes(inventory.ram_available_bytes) - model.other_bytes
    local_layers = blocks - sum(on_workers)
    local_capacity = layers_that_fit(model, context_length, max(local_room, 0), slots=slots, kv_width=kv_width)
    if local_layers > local_capacity:
        held = ", ".join(
            f"{worker}: {count} ({format_bytes(link.free_bytes)} free)"
            for worker, count, link in zip(workers, capacities, links, strict=True)
        )
        raise BackendUnavailable(
            f"The workers and this machine cannot hold the model's {blocks} layers with a {context_length}-token "
            f"context: the workers hold {held}; this machine has {format_bytes(inventory.ram_available_bytes)} free.",
            "Pair another worker, free memory on them, or use a smaller context or model.",
        )
    return _Split(links, capacities, on_workers, speeds, keep_output, local_layers, local_capacity)


def _split_lines(model: ModelInfo, placements: Sequence[Placement], split: _Split) -> list[str]:
    """Where each range of layers runs, what decided the shares, and what the links cost per token."""
    links = split.links
    lines = [
        f"layers {p.first_layer}-{p.layer_range.stop - 1} on this CPU (the workers cannot hold them)"
        for p in placements
        if p.device.kind == "cpu"
    ]
    on_workers = [p for p in placements if p.device.kind == "worker"]
    for placement, capacity, link in zip(on_workers, split.capacities, links, strict=True):
        worker, span = placement.device.address, placement.layer_range
        if span:
            lines.append(f"layers {span.start}-{span.stop - 1} on the worker at {worker}")
        elif link.free_bytes and not capacity:
            lines.append(f"no layer on {worker}: {format_bytes(link.free_bytes)} free holds none with its cache")
        else:
            lines.append(f"no layer on {worker}")
    if split.speeds:
        lines.append(_speed_line(links, any(link.free_bytes for link in links)))
    elif any(link.free_bytes for link in links):
        lines.append("layers in proportion to each worker's free memory when it was paired")
    if split.keep_output:
        lines.append(
            f"the output layer on this CPU: each token brings back the last worker's "
            f"{format_bytes(model.embedding_length * FLOAT_BYTES)} hidden state, not "
            f"{format_bytes(model.vocab_size * FLOAT_BYTES)} of logits"
        )
    network_ms = network_ms_per_token(links, model.vocab_size, model.embedding_length, not split.keep_output)
    fits_here = model.block_count <= split.local_capacity
    warning = slower_than_alone(network_ms, fits_here=fits_here, devices=[link.device for link in links])
    lines.append(warning or f"each token also waits about {network_ms:.1f} ms on the links")
    return lines


def worker_speeds(links: Sequence[LinkFacts]) -> tuple[float, ...]:
    """The weight of each worker's share of the layers: its measured memory read speed (a layer's time on a CPU is
    the time to read its weights), a worker not measured counted at the others' mean; empty when none is measured."""
    known = [link.read_bytes_per_s for link in links if link.read_bytes_per_s > 0]
    if not known:
        return ()
    mean = sum(known) / len(known)
    return tuple(link.read_bytes_per_s if link.read_bytes_per_s > 0 else mean for link in links)


def _speed_line(links: Sequence[LinkFacts], memory_known: bool) -> str:
    speeds = ", ".join(
        f"{link.address} {link.read_bytes_per_s / 1e9:.1f} GB/s" if link.read_bytes_per_s > 0 else f"{link.address} ?"
        for link in links
    )
    within = " within its free memory" if memory_known else ""
    return f"layers in proportion to each worker's measured memory read speed ({speeds}){within}"
