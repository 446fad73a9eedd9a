"""Where llama.cpp can run a model on this machine: its proposals for ``backends/selection.py``. Pure.

On NVIDIA GPUs (llama.cpp built with CUDA): the whole model on the GPU that holds it, else split by layers across
GPUs that hold it together (in proportion to their free memory), else as many layers as fit on the largest and the
rest on the CPU; a GPU that sits idle says why (no CUDA in this build, a broken driver, too little free memory). On
the CPU, one thread per physical core. With workers (the ``pipeline`` choice), the layers on the workers' devices
(``backends/workers/plan.py``). The user can force the GPU (the ``cuda`` choice, a ``cuda:N`` device) or a layer
count; a forced choice that cannot work is refused with what would fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from backends.base import Backend
from backends.hardware import GpuDevice
from backends.memory import (
    estimate_offload,
    format_bytes,
    layers_that_fit,
    split_layers,
    usable_bytes,
)
from backends.placement import (
    GPU_HEADROOM_BYTES,
    RANK_CPU,
    RANK_GPU_FULL,
    RANK_GPU_PARTIAL,
    RANK_GPU_SPLIT,
    cpu_fits,
    cpu_option,
    cpu_placement,
    sum_memory,
)
from backends.plan import BackendPlan, Placement, PlanContext, PlanOption, Preferences, cuda_device, in_layer_order
from backends.plan_reasons import LLAMACPP_CPU, NVIDIA
from backends.workers.plan import pipeline_plan
from models.shared.errors import BackendUnavailable, DoesNotFit


def propose(ctx: PlanContext, cls: type[Backend]) -> list[PlanOption]:
    """llama.cpp's options here: on the workers when the user chose the pipeline, else the CPU and NVIDIA GPUs."""
    if ctx.prefs.backend == "pipeline":
        # The pipeline plans the answers asked for itself: proposed once, for the first count the selection tries.
        return [PlanOption(RANK_CPU, _pipeline(ctx), LLAMACPP_CPU)] if ctx.slots == max(ctx.prefs.slots, 1) else []
    return _llamacpp_options(ctx, cls)


def _pipeline(ctx: PlanContext) -> BackendPlan:
    """llama.cpp with the layers on the workers, and on this CPU what they cannot hold (``backends.workers.plan``)."""
    prefs, inventory = ctx.prefs, ctx.inventory
    if not prefs.workers:
        raise BackendUnavailable(
            "The pipeline backend splits a model across workers, and none was given.",
            "Start `hearth worker` where the layers should run, then pair with it: "
            "hearth workers add HOST:PORT --code CODE (the code it printed).",
            page_remedy="Start Hearth's worker where the layers should run, then pair with it under Workers "
            "(Hardware tab).",
        )
    build = inventory.llama_cpp
    if build is None or not build.rpc:
        raise BackendUnavailable(
            "This llama.cpp build cannot split a model across workers (it has no RPC backend)."
            if build is not None
            else "llama-cpp-python is not installed.",
            "Run `make setup` (Hearth builds llama.cpp with GGML_RPC=ON).",
        )
    return pipeline_plan(inventory, ctx.model, prefs, ctx.context, ctx.threads, _gpus_in_the_chain(ctx))


def _gpus_in_the_chain(ctx: PlanContext) -> list[GpuDevice]:
    """This computer's NVIDIA GPUs for the pipeline, all of them in llama.cpp's device order (by number), so that the
    split names each; with a ``cuda:N`` device asked for, the others hold no layer. None with the CPU asked for, or
    when llama.cpp cannot use them (said as for the other plans)."""
    if ctx.prefs.device == "cpu" or ctx.prefs.device.upper().startswith(("GPU", "NPU")) or not _usable_gpus(ctx):
        return []
    wanted = ctx.prefs.device.removeprefix("cuda:") if ctx.prefs.device.startswith("cuda:") else None
    return [
        gpu if wanted is None or str(gpu.index) == wanted else replace(gpu, free_bytes=0)
        for gpu in sorted(ctx.inventory.gpus, key=lambda g: g.index)
    ]


def _wants_gpu(prefs: Preferences) -> bool:
    return prefs.backend == "cuda" or prefs.device.startswith("cuda") or bool(prefs.gpu_layers)


def _llamacpp_options(ctx: PlanContext, cls: type[Backend]) -> list[PlanOption]:
    prefs = ctx.prefs
    options: list[PlanOption] = []
    if prefs.device in ("auto", "cpu") and not _wants_gpu(prefs):
        options += cpu_option(ctx, cls, RANK_CPU, LLAMACPP_CPU)
    if prefs.device == "cpu" or prefs.device.upper().startswith(("GPU", "NPU")):  # not an NVIDIA device
        return options
    gpus = _usable_gpus(ctx)
    if not gpus:
        if _wants_gpu(prefs):
            ctx.rejections.append("llama.cpp (CUDA): " + (ctx.not_used[-1] if ctx.not_used else "no NVIDIA GPU found"))
        return options
    if prefs.gpu_layers is not None:
        return [*options, *_forced_layers(ctx, gpus, prefs.gpu_layers)]
    full = _gpu_full(ctx, gpus)
    if full is not None:
        return [*options, full]
    split = _gpu_split(ctx, gpus)
    if split is not None:
        return [*options, split]
    partial = _gpu_partial(ctx, gpus[0])
    if partial is None:
        ctx.note(NVIDIA, f"{_gpu_label(gpus[0])}: the layers that would not fit there do not fit in RAM either")
        return options
    return [*options, partial]


def _usable_gpus(ctx: PlanContext) -> list[GpuDevice]:
    inventory, prefs = ctx.inventory, ctx.prefs
    if inventory.gpu_problem:
        ctx.not_used.append(f"{inventory.gpu_problem}; check the driver with `nvidia-smi`, then restart Hearth")
        ctx.note(NVIDIA, ctx.not_used[-1])
        return []
    if not inventory.gpus:
        return []
    build = inventory.llama_cpp
    if build is None or "cuda" not in build.ggml_backends:
        names = ", ".join(g.name for g in inventory.gpus)
        ctx.not_used.append(
            f"{names}: this llama.cpp build has no CUDA support; install the NVIDIA CUDA toolkit (nvcc) and start "
            "Hearth again with `make run`, which rebuilds it with GPU offload"
        )
        ctx.note(NVIDIA, ctx.not_used[-1])
        return []
    gpus = sorted(inventory.gpus, key=lambda g: g.free_bytes, reverse=True)
    if prefs.device.startswith("cuda:"):
        wanted = prefs.device.removeprefix("cuda:")
        gpus = [g for g in gpus if str(g.index) == wanted]
        if not gpus:
            known = ", ".join(g.id for g in inventory.gpus)
            ctx.rejections.append(f"llama.cpp (CUDA): there is no GPU {prefs.device} (GPUs here: {known})")
    return gpus


def _gpu_label(gpu: GpuDevice) -> str:
    return f"{gpu.name} ({format_bytes(gpu.free_bytes)} free)"


def _gpu_full(ctx: PlanContext, gpus: Sequence[GpuDevice]) -> PlanOption | None:
    model, blocks = ctx.model, ctx.model.block_count
    for gpu in gpus:
        offload = estimate_offload(model, ctx.context, (blocks,), ctx.slots, ctx.kv_width)
        need = offload.gpus[0].total_bytes
        if need <= usable_bytes(gpu.free_bytes, GPU_HEADROOM_BYTES) and cpu_fits(ctx, offload.cpu):
            placements = (
                Placement(cuda_device(gpu.index), gpu.name, blocks, offload.gpus[0], gpu.free_bytes),
                cpu_placement(ctx, offload.cpu, 0),
            )
            reasons = (
                f"the whole model and its context cache fit on {gpu.name}: about {format_bytes(need)} of "
                f"{format_bytes(gpu.free_bytes)} free",
            )
            plan = _gpu_plan(ctx, "llama.cpp (CUDA)", placements, reasons)
            return PlanOption(RANK_GPU_FULL, plan, NVIDIA)
    return None


def _gpu_split(ctx: PlanContext, gpus: Sequence[GpuDevice]) -> PlanOption | None:
    model, blocks = ctx.model, ctx.model.block_count
    if len(gpus) < 2:
        return None
    ordered = sorted(gpus, key=lambda g: g.index)
    capacities = [
        layers_that_fit(
            model, ctx.context, usable_bytes(g.free_bytes, GPU_HEADROOM_BYTES), slots=ctx.slots, kv_width=ctx.kv_width
        )
        for g in ordered
    ]
    # The last GPU also holds the output projection; count that against it.
    last_room = usable_bytes(ordered[-1].free_bytes, GPU_HEADROOM_BYTES)
    capacities[-1] = layers_that_fit(
        model, ctx.context, last_room, slots=ctx.slots, kv_width=ctx.kv_width, with_output=True
    )
    if sum(capacities) < blocks:
        return None
    counts = split_layers(blocks, tuple(capacities))
    offload = estimate_offload(model, ctx.context, counts, ctx.slots, ctx.kv_width)
    if not cpu_fits(ctx, offload.cpu):
        return None
    on_gpus = [
        Placement(cuda_device(g.index), g.name, n, memory, g.free_bytes)
        for g, n, memory in zip(ordered, counts, offload.gpus, strict=True)
    ]
    placements = (*on_gpus, cpu_placement(ctx, offload.cpu, 0))
    reasons = (
        "no single GPU holds the model, but together they do: layers split "
        + " + ".join(f"{n} on {g.name}" for g, n in zip(ordered, counts, strict=True))
        + ", in proportion to free memory",
    )
    label = f"llama.cpp (CUDA, {len(ordered)} GPUs)"
    plan = _gpu_plan(ctx, label, placements, reasons)
    return PlanOption(RANK_GPU_SPLIT, plan, NVIDIA)


def _gpu_partial(ctx: PlanContext, gpu: GpuDevice) -> PlanOption | None:
    model, blocks = ctx.model, ctx.model.block_count
    # the output projection goes to the GPU with the layers (llama.cpp offloads it first): count it there
    room = usable_bytes(gpu.free_bytes, GPU_HEADROOM_BYTES)
    layers = layers_that_fit(model, ctx.context, room, slots=ctx.slots, kv_width=ctx.kv_width, with_output=True)
    if layers == 0:
        ctx.not_used.append(f"{_gpu_label(gpu)}: not even one layer fits")
        ctx.note(NVIDIA, ctx.not_used[-1])
        return None
    offload = estimate_offload(model, ctx.context, (layers,), ctx.slots, ctx.kv_width)
    if not cpu_fits(ctx, offload.cpu):
        return None
    placements = (
        Placement(cuda_device(gpu.index), gpu.name, layers, offload.gpus[0], gpu.free_bytes),
        cpu_placement(ctx, offload.cpu, blocks - layers),
    )
    reasons = (
        f"the model does not fit on {_gpu_label(gpu)}, so {layers} of {blocks} layers run there and the rest "
        "on the CPU (slower than all on the GPU; a smaller context or a lower-bit model would move more over)",
    )
    return PlanOption(
        RANK_GPU_PARTIAL,
        _gpu_plan(ctx, "llama.cpp (CPU + GPU)", placements, reasons),
        NVIDIA,
    )


def _forced_layers(ctx: PlanContext, gpus: Sequence[GpuDevice], requested: int) -> list[PlanOption]:
    model, blocks = ctx.model, ctx.model.block_count
    gpu = gpus[0]
    layers = min(requested, blocks)
    offload = estimate_offload(model, ctx.context, (layers,), ctx.slots, ctx.kv_width)
    need = offload.gpus[0].total_bytes
    room = usable_bytes(gpu.free_bytes, GPU_HEADROOM_BYTES)
    if need > room:
        # the output projection goes with the layers
        most = layers_that_fit(model, ctx.context, room, slots=ctx.slots, kv_width=ctx.kv_width, with_output=True)
        failure = DoesNotFit(
            f"{layers} layers of {model.display_name} need about {format_bytes(need)} on {gpu.name}, which has "
            f"{format_bytes(gpu.free_bytes)} free.",
            f"Ask for at most {most} GPU layers, or leave the layer count to Hearth.",
        )
        failure.gpu_layers_that_fit = most
        ctx.memory_failures.append(failure)
        ctx.rejections.append(f"llama.cpp (CUDA): {failure.message}")
        return []
    placements = (
        Placement(cuda_device(gpu.index), gpu.name, layers, offload.gpus[0], gpu.free_bytes),
        cpu_placement(ctx, offload.cpu, blocks - layers),
    )
    reasons = (f"{layers} of {blocks} layers on {gpu.name}, as configured",)
    label = "llama.cpp (CUDA)" if layers >= blocks else "llama.cpp (CPU + GPU)"
    return [PlanOption(RANK_GPU_FULL, _gpu_plan(ctx, label, placements, reasons), NVIDIA)]


def _gpu_plan(ctx: PlanContext, label: str, placements: tuple[Placement, ...], reasons: tuple[str, ...]) -> BackendPlan:
    """The plan for ``placements`` (the GPUs by number, then the CPU): llama.cpp's layer count, split and main GPU
    are read off them when it loads."""
    plan = BackendPlan(
        backend="llamacpp",
        label=label,
        threads=ctx.threads,
        context_length=ctx.context,
        memory=sum_memory(p.memory for p in placements),
        reasons=reasons,
        placements=in_layer_order(placements),
        slots=ctx.slots,
        kv_cache_type=ctx.prefs.kv_cache_type,
    )
    return replace(plan, device=f"cuda:{plan.main_gpu}")
