"""The pipelined plan: one model's decoder layers split by whole ranges across `hearth worker` processes (llama.cpp's
RPC devices) and this computer's own NVIDIA GPUs, the rest of the run (the threads, the context, the answers at once)
as llama.cpp's CPU plan has it.

Pure. The GPUs here take the layers first, as many as their free memory holds (no link to cross, and a GPU reads its
weights far faster than a CPU worker); they come last in the chain (llama.cpp lists the RPC devices before its local
GPUs and lays the layers out in that order), so the last GPU holds the output projection and no logits cross the
network. The workers hold the rest in proportion to their memory read speed as each measured it at its start (on a
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

from backends.hardware import GpuDevice, HardwareInventory
from backends.memory import (
    KV_WIDTHS,
    estimate_offload,
    format_bytes,
    layers_that_fit,
    split_layers,
    usable_bytes,
    weighted_split,
)
from backends.placement import GPU_HEADROOM_BYTES
from backends.plan import CPU, BackendPlan, Placement, Preferences, cuda_device, in_layer_order, worker_device
from backends.workers.cost import FLOAT_BYTES, LinkFacts, network_ms_per_token, output_here, slower_than_alone
from models.gguf import ModelInfo
from models.shared.errors import BackendUnavailable
from models.shared.wording import plural

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
    """How the layers fall: on each worker (in the order given), on each GPU here, and the first ones on this CPU."""

    links: tuple[LinkFacts, ...]  # each worker's, in the order of the chain
    on_gpus: tuple[int, ...]  # on each of this computer's GPUs given, in their order
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
    gpus: Sequence[GpuDevice] = (),
) -> BackendPlan:
    """The layers on ``gpus`` (this computer's, by number) as far as they hold them, the rest on ``prefs.workers`` in
    proportion to their free memory (as pairing measured it), and on this CPU the first ones they cannot hold;
    refused, with what each device can hold, when they all cannot. The reasons are the split's own: the selection
    puts the choice, the threads, the context and the cache around them."""
    workers, slots, kv_width = prefs.workers, max(prefs.slots, 1), KV_WIDTHS[prefs.kv_cache_type]
    split = _split(inventory, model, prefs, context_length, gpus)
    local_layers, on_workers = split.local_layers, split.on_workers
    counts = (*on_workers, *split.on_gpus)
    offload = estimate_offload(model, context_length, counts, slots, kv_width, output_here=split.keep_output)
    on_rpc = tuple(
        Placement(worker_device(worker), f"hearth worker at {worker}", count, memory, link.free_bytes or UNMEASURED)
        for worker, count, memory, link in zip(
            workers, on_workers, offload.gpus[: len(workers)], split.links, strict=True
        )
    )
    on_gpus = tuple(
        Placement(cuda_device(gpu.index), gpu.name, count, memory, gpu.free_bytes)
        for gpu, count, memory in zip(gpus, split.on_gpus, offload.gpus[len(workers) :], strict=True)
    )
    here = Placement(
        CPU, inventory.cpu_model, local_layers, offload.cpu, inventory.ram_available_bytes, output=split.keep_output
    )
    placements = in_layer_order(((here,) if local_layers or split.keep_output else ()) + on_rpc + on_gpus)
    used_gpus = sum(1 for count in split.on_gpus if count)
    parts = [plural(len(workers), "worker")]
    parts += [f"{plural(used_gpus, 'GPU')} here"] if used_gpus else []
    parts += ["this CPU"] if local_layers else []
    label = "llama.cpp split across " + " and ".join((", ".join(parts[:-1]), parts[-1]) if parts[1:] else parts)
    return BackendPlan(
        backend="llamacpp",
        label=label,
        threads=threads,
        context_length=context_length,
        memory=offload.cpu,
        reasons=tuple(_split_lines(model, placements, split)),
        placements=placements,
        device="",
        slots=slots,
        kv_cache_type=prefs.kv_cache_type,
    )


def _gpus_first(
    model: ModelInfo, context_length: int, gpus: Sequence[GpuDevice], slots: int, kv_width: float
) -> tuple[int, ...]:
    """The layers each of this computer's GPUs takes before the workers get any: as many as its free memory holds,
    up to the model's. They fill from the last one backwards: llama.cpp gives the last layers and the output
    projection to the last device holding layers, so the GPU that takes the last layers is the one whose room counts
    the output projection, whichever of them that is."""
    counts = [0] * len(gpus)
    left = model.block_count
    for index in reversed(range(len(gpus))):
        room = usable_bytes(gpus[index].free_bytes, GPU_HEADROOM_BYTES)
        with_output = left == model.block_count  # no GPU after this one took a layer
        holds = layers_that_fit(model, context_length, room, slots=slots, kv_width=kv_width, with_output=with_output)
        counts[index] = min(holds, left)
        left -= counts[index]
    return tuple(counts)


def _split(
    inventory: HardwareInventory,
    model: ModelInfo,
    prefs: Preferences,
    context_length: int,
    gpus: Sequence[GpuDevice],
) -> _Split:
    """The layers on this computer's GPUs as far as they hold them, then on the workers, each at most what its free
    memory holds, and the first ones here; refused when no GPU here or worker holds one, or when this machine cannot
    hold what they leave."""
    workers, slots, kv_width = prefs.workers, max(prefs.slots, 1), KV_WIDTHS[prefs.kv_cache_type]
    by_address = {link.address: link for link in prefs.worker_links}
    links = tuple(by_address.get(worker, LinkFacts(0.0, 0.0, worker)) for worker in workers)
    on_gpus = _gpus_first(model, context_length, gpus, slots, kv_width)
    blocks = model.block_count - sum(on_gpus)  # what is left for the workers and this CPU
    # The output projection goes with the last layers (llama.cpp offloads it first): to a GPU here when one holds
    # layers, else to the last worker, unless that is a CPU: then it stays here, and only the hidden state crosses
    # the network per token, not the logits.
    keep_output = not any(on_gpus) and output_here([links[-1].device])
    capacities = tuple(
        layers_that_fit(
            model,
            context_length,
            usable_bytes(link.free_bytes),
            slots=slots,
            kv_width=kv_width,
            with_output=not keep_output and not any(on_gpus) and index == len(links) - 1,
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
    if not any(on_workers) and not any(on_gpus):
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
        gpus_hold = f"; the GPUs here hold {sum(on_gpus)}" if gpus else ""
        raise BackendUnavailable(
            f"The workers and this machine cannot hold the model's {model.block_count} layers with a "
            f"{context_length}-token context: the workers hold {held}{gpus_hold}; this machine has "
            f"{format_bytes(inventory.ram_available_bytes)} free.",
            "Pair another worker, free memory on them, or use a smaller context or model.",
        )
    return _Split(links, on_gpus, capacities, on_workers, speeds, keep_output, local_layers, local_capacity)


def _split_lines(model: ModelInfo, placements: Sequence[Placement], split: _Split) -> list[str]:
    """Where each range of layers runs, what decided the shares, and what the links cost per token."""
    links, gpus_here, workers_hold = split.links, any(split.on_gpus), sum(split.on_workers)
    one_gpu = sum(1 for count in split.on_gpus if count) == 1
    the_gpus = "the GPU here" if one_gpu else "the GPUs here"
    holders = f"{the_gpus} and the workers" if gpus_here else "the workers"
    lines = [
        f"layers {p.first_layer}-{p.layer_range.stop - 1} on this CPU ({holders} cannot hold them)"
        for p in placements
        if p.device.kind == "cpu" and p.layers
    ]
    on_workers = [p for p in placements if p.device.kind == "worker"]
    for placement, capacity, link in zip(on_workers, split.capacities, links, strict=True):
        worker, span = placement.device.address, placement.layer_range
        if span:
            lines.append(f"layers {span.start}-{span.stop - 1} on the worker at {worker}")
        elif gpus_here and not workers_hold:
            lines.append(f"no layer on {worker}: {the_gpus} {'holds' if one_gpu else 'hold'} them all")
        elif link.free_bytes and not capacity:
            lines.append(f"no layer on {worker}: {format_bytes(link.free_bytes)} free holds none with its cache")
        else:
            lines.append(f"no layer on {worker}")
    lines += [
        f"layers {p.first_layer}-{p.layer_range.stop - 1} on {p.name} here ({p.device}): filled first, no link to cross"
        for p in placements
        if p.device.kind == "cuda" and p.layers
    ]
    if gpus_here and not workers_hold:
        return lines  # no layer on a worker: none crosses a link
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
    logits_back = not split.keep_output and not gpus_here
    network_ms = network_ms_per_token(links, model.vocab_size, model.embedding_length, logits_back)
    fits_here = model.block_count <= split.local_capacity
    devices = [link.device for link in links] + (["CUDA (here)"] if gpus_here else [])
    warning = slower_than_alone(network_ms, fits_here=fits_here, devices=devices)
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
