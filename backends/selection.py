"""Decide where a model runs on this machine — backend, devices, layers per device, threads, context — and say
why in plain words. Pure: it reads a hardware inventory and model metadata, never the hardware itself.

The policy, best first:
1. An NVIDIA GPU that holds the whole model with its KV cache runs it all (llama.cpp with CUDA).
2. A model no single GPU holds but several do together is split by layers, in proportion to free memory.
3. Otherwise as many layers as fit go to the largest GPU and the rest stay on the CPU (partial offload).
4. An Intel GPU, then an Intel NPU, through OpenVINO, when its GGUF reader knows the architecture and weights
   and (NPU) the prompt limits fit.
5. llama.cpp on the CPU with one thread per physical core.
A GPU that sits idle is never silent: the plan says why (no CUDA in this llama.cpp build, a broken driver, too
little free memory). The user can force a backend, a device, a layer count or a context; a forced choice that
cannot work is an error that says so, with the largest context that would fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from app.errors import BackendUnavailable, DoesNotFit
from backends.base import Backend, LoadOptions, WorkerLink
from backends.hardware import GpuDevice, HardwareInventory, OpenVinoDevice
from backends.memory import (
    KV_WIDTHS,
    MIB,
    MemoryEstimate,
    estimate_offload,
    format_bytes,
    largest_context,
    layers_that_fit,
    llama_gpu_layers,
    split_layers,
    usable_bytes,
)
from backends.openvino import NPU_MAX_PROMPT_TOKENS, NPU_MIN_RESPONSE_TOKENS
from backends.plan_reasons import (
    INTEL_GPU,
    LLAMACPP_CPU,
    NPU,
    NVIDIA,
    OPENVINO_CPU,
    ROUTES,
    comes_after,
    missing_device_reason,
    not_chosen,
    openvino_cpu_reason,
    rank_why,
)
from backends.workers.cost import LinkFacts
from models.gguf import ModelInfo

# CUDA's own context and cuBLAS workspaces take this much of a GPU before any model byte.
GPU_HEADROOM_BYTES = 400 * MIB

RANK_GPU_FULL, RANK_GPU_SPLIT, RANK_GPU_PARTIAL, RANK_INTEL_GPU, RANK_NPU, RANK_CPU, RANK_OPENVINO_CPU = range(7)


@dataclass(frozen=True)
class Preferences:
    """What the user asked for; ``auto`` and ``None`` leave the choice to Hearth."""

    backend: str = "auto"  # auto, llamacpp, cuda (llama.cpp on NVIDIA GPUs), openvino, fake
    threads: int | None = None
    context_length: int = 4096
    device: str = "auto"  # auto, cpu, cuda, cuda:N, gpu (Intel, OpenVINO), npu, or an OpenVINO id such as GPU.1
    gpu_layers: int | None = None
    slots: int = 1  # answers written at once, each with a context of its own (backends that batch; others: 1)
    workers: tuple[str, ...] = ()  # `hearth worker` addresses, for the pipeline backend
    worker_links: tuple[LinkFacts, ...] = ()  # their links as measured at pairing (any order; matched by address)
    kv_cache_type: str = "f16"  # llama.cpp's context cache: f16, q8_0, q4_0


@dataclass(frozen=True)
class Placement:
    """What one device holds under a plan."""

    device: str  # "CPU", "cuda:0", "NPU", "GPU.0"
    name: str
    layers: int
    memory: MemoryEstimate
    available_bytes: int


@dataclass(frozen=True)
class BackendPlan:
    backend: str
    label: str
    devices: tuple[str, ...]
    threads: int
    context_length: int
    memory: MemoryEstimate
    reasons: tuple[str, ...]
    placements: tuple[Placement, ...] = field(default=())
    gpu_layers: int = 0
    tensor_split: tuple[float, ...] = ()
    main_gpu: int = 0
    device: str = ""  # the backend's own device string
    slots: int = 1  # answers written at once; ``context_length`` is each one's
    workers: tuple[str, ...] = ()  # `hearth worker` addresses holding layers (the pipeline backend)
    kv_cache_type: str = "f16"
    output_on_cpu: bool = False  # the output projection on this CPU, the layers elsewhere (see LoadOptions)

    def load_options(
        self, seed: int = 0, cache_dir: str | None = None, worker_links: tuple[WorkerLink, ...] = ()
    ) -> LoadOptions:
        return LoadOptions(
            context_length=self.context_length,
            threads=self.threads,
            gpu_layers=self.gpu_layers,
            seed=seed,
            device=self.device,
            tensor_split=self.tensor_split,
            main_gpu=self.main_gpu,
            cache_dir=cache_dir,
            slots=self.slots,
            workers=self.workers,
            worker_links=worker_links,
            kv_cache_type=self.kv_cache_type,
            output_on_cpu=self.output_on_cpu,
        )


class NoBackend(BackendUnavailable):
    def __init__(self, rejections: Sequence[str]) -> None:
        super().__init__(
            "No backend can run this model here: " + "; ".join(rejections) + ".",
            "Choose another backend or device (Automatic picks one that works here), or another model.",
        )
        self.rejections = tuple(rejections)


@dataclass(frozen=True)
class _Option:
    rank: int
    plan: BackendPlan
    route: str = ""  # one of plan_reasons.ROUTES; "" for a backend automatic selection never weighs


@dataclass
class _Context:
    """Everything the per-backend policies share for one decision."""

    inventory: HardwareInventory
    model: ModelInfo
    prefs: Preferences
    context: int
    context_reason: str
    threads: int
    threads_reason: str
    slots: int = 1  # for backends that batch answers; the others always plan one
    rejections: list[str] = field(default_factory=list)
    not_used: list[str] = field(default_factory=list)  # why a faster device sits idle, shown with the plan
    memory_failures: list[DoesNotFit] = field(default_factory=list)
    route_notes: dict[str, str] = field(default_factory=dict)  # why a route gave no option, by route

    @property
    def kv_width(self) -> float:
        """Bytes per context-cache value for llama.cpp plans."""
        return KV_WIDTHS[self.prefs.kv_cache_type]

    def note(self, route: str, reason: str) -> None:
        self.route_notes.setdefault(route, reason)


def choose_context(model: ModelInfo, requested: int) -> tuple[int, str]:
    if requested > model.trained_context_length:
        return (
            model.trained_context_length,
            f"context {model.trained_context_length} tokens (the model was trained for no more; "
            f"{requested} was asked for)",
        )
    return (
        requested,
        f"context {requested} tokens (the model was trained for up to {model.trained_context_length})",
    )


def choose_threads(inventory: HardwareInventory, requested: int | None) -> tuple[int, str]:
    if requested:
        return requested, f"{requested} threads, as configured"
    # Hyper-threads share the FPU; matrix-vector work runs best on one thread per physical core.
    return inventory.physical_cores, f"{inventory.physical_cores} threads, one per physical core"


def select_backend(
    inventory: HardwareInventory,
    model: ModelInfo,
    prefs: Preferences,
    automatic: Sequence[type[Backend]],
    named: Mapping[str, type[Backend]],
) -> BackendPlan:
    if prefs.backend == "pipeline":
        return _pipeline(inventory, model, prefs, automatic, named)
    classes = _candidate_classes(prefs, automatic, named)
    context, context_reason = choose_context(model, prefs.context_length)
    threads, threads_reason = choose_threads(inventory, prefs.threads)
    # Parallel answers multiply the KV cache. Fewer of them never beat a faster placement: the best placement
    # any count allows wins, with as many answers as still fit there.
    chosen: tuple[_Option, _Context, list[_Option]] | None = None
    ctx: _Context | None = None
    for slots in slot_counts(prefs.slots):
        ctx = _Context(inventory, model, prefs, context, context_reason, threads, threads_reason, slots)
        options = _options(ctx, classes)
        if options:
            best_here = min(options, key=lambda option: option.rank)
            if chosen is None or best_here.rank < chosen[0].rank:
                chosen = (best_here, ctx, options)
    assert ctx is not None  # slot_counts always yields 1
    if chosen is None:
        if ctx.memory_failures:  # the model would run here, with less context or more free memory
            raise ctx.memory_failures[0]
        raise NoBackend(ctx.rejections)
    option, ctx, options = chosen
    best = option.plan
    forced = prefs.backend != "auto" or prefs.device != "auto" or prefs.gpu_layers is not None
    if forced:
        # Only the asked-for backend was weighed; still, an idle faster device is never silent.
        headline = f"{best.label}: chosen by you"
        others = [f"Not used: {reason}" for reason in ctx.not_used]
    else:
        headline = f"{best.label}: chosen automatically — {_rank_why(option)}"
        others = explain_alternatives(ctx, classes, options, option)
    parallel = any(cls.name == best.backend and cls.capabilities.parallel for cls in classes)
    slots_reason = _slots_reason(best, prefs.slots, parallel)
    cache_reason = (kv_cache_reason(best.kv_cache_type),) if best.backend == "llamacpp" else ()
    return dataclasses.replace(
        best, reasons=(headline, *best.reasons, *others, threads_reason, context_reason, slots_reason, *cache_reason)
    )


def kv_cache_reason(kv_cache_type: str) -> str:
    width = KV_WIDTHS[kv_cache_type]
    if kv_cache_type == "f16":
        return "context cache in f16 (2 bytes a value; --kv-cache q8_0 or q4_0 takes less memory)"
    said = f"context cache in {kv_cache_type} ({width:.2f} bytes a value, with flash attention), as configured"
    if kv_cache_type == "q4_0":
        # bench/data/kv-cache.json: Qwen2.5-Coder-1.5B's perplexity went from 1.42 (f16) to 1297 with q4_0
        said += "; q4_0 can ruin some models' answers (Qwen2.5 here), q8_0 is the safe saving"
    return said


def _pipeline(
    inventory: HardwareInventory,
    model: ModelInfo,
    prefs: Preferences,
    automatic: Sequence[type[Backend]],
    named: Mapping[str, type[Backend]],
) -> BackendPlan:
    """llama.cpp with the layers on the workers, and on this CPU what they cannot hold (``backends.workers.plan``)."""
    from backends.workers.plan import pipeline_plan

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
    context = choose_context(model, prefs.context_length)
    threads = choose_threads(inventory, prefs.threads)
    return pipeline_plan(inventory, model, prefs, context, threads)


def _rank_why(option: _Option) -> str:
    return rank_why(option.route, split=option.rank == RANK_GPU_SPLIT, partial=option.rank == RANK_GPU_PARTIAL)


def _routes_of(cls: type[Backend]) -> tuple[str, ...]:
    if cls.name == "llamacpp":
        return (NVIDIA, LLAMACPP_CPU)
    if cls.name == "openvino":
        return (INTEL_GPU, NPU, OPENVINO_CPU)
    return ()


def explain_alternatives(
    ctx: _Context, classes: Sequence[type[Backend]], options: Sequence[_Option], chosen: _Option
) -> list[str]:
    """One line per route automatic selection weighed and did not take, with the measured or known reason."""
    weighed = {route: cls for cls in classes for route in _routes_of(cls)}
    viable = {option.route for option in options}
    said: list[tuple[tuple[str, ...], str]] = []
    for route in ROUTES:
        if route == chosen.route or route not in weighed:
            continue
        if route in viable:
            reason = comes_after(chosen.plan.label)
        elif route in ctx.route_notes:
            reason = ctx.route_notes[route]
        elif route == OPENVINO_CPU and _has_device(ctx.inventory, "CPU"):
            reason = _openvino_cpu_alternative(ctx, weighed[route], chosen)
        else:
            reason = missing_device_reason(route, ctx.inventory)
        if said and said[-1][1] == reason:  # one line for routes turned down for the same reason
            said[-1] = ((*said[-1][0], route), reason)
        else:
            said.append(((route,), reason))
    return [not_chosen(routes, reason) for routes, reason in said]


def _has_device(inventory: HardwareInventory, kind: str) -> bool:
    return any(device.kind == kind for device in inventory.openvino or ())


def _openvino_cpu_alternative(ctx: _Context, cls: type[Backend], chosen: _Option) -> str:
    """OpenVINO on the CPU runs only when asked for; say whether it could, and what it would gain."""
    scratch = dataclasses.replace(ctx, rejections=[], not_used=[], memory_failures=[], route_notes={})
    if not _cpu_option(scratch, cls, RANK_OPENVINO_CPU, OPENVINO_CPU):
        return scratch.route_notes.get(OPENVINO_CPU, "the model does not fit in the memory available")
    if chosen.route != LLAMACPP_CPU:
        return comes_after(chosen.plan.label)
    return openvino_cpu_reason(ctx.inventory.isa_flags)


def slot_counts(requested: int) -> list[int]:
    """The parallel answer counts to try, most first: the request, then halving down to one."""
    counts = [max(requested, 1)]
    while counts[-1] > 1:
        counts.append(counts[-1] // 2)
    return counts


def _options(ctx: _Context, classes: Sequence[type[Backend]]) -> list[_Option]:
    inventory, model = ctx.inventory, ctx.model
    options: list[_Option] = []
    for cls in classes:
        available = cls.availability(inventory)
        if not available.ok:
            ctx.rejections.append(f"{cls.label}: {available.reason} ({available.remedy})")
            for route in _routes_of(cls):
                ctx.note(route, f"{available.reason} ({available.remedy})")
            continue
        support = cls.supports(model)
        if not support.ok:
            ctx.rejections.append(f"{cls.label}: {support.reason}")
            idle = [d.full_name for d in inventory.openvino or () if d.accelerator] if cls.name == "openvino" else []
            if idle:
                ctx.not_used.append(f"{', '.join(idle)}: {support.reason}")
            mixed_in = f" ({model.quantization} mixes them in)" if support.reason.endswith(" weights") else ""
            for route in _routes_of(cls):
                ctx.note(route, f"{support.reason}{mixed_in}")
            continue
        if cls.name == "llamacpp":
            options += _llamacpp_options(ctx, cls)
        elif cls.name == "openvino":
            options += _openvino_options(ctx, cls)
        else:
            options += _cpu_option(ctx, cls, RANK_CPU, "")
    return options


def _slots_reason(plan: BackendPlan, requested: int, parallel: bool) -> str:
    if not parallel:
        return f"answers are served one at a time ({plan.label} writes one answer at once)"
    each = f"of {plan.context_length} tokens each, each with its own context cache"
    if plan.slots >= requested:
        return f"{plan.slots} parallel answers {each}" if plan.slots > 1 else "one answer at a time, as configured"
    short = f"{requested} were asked for, but more would not fit in memory with this placement"
    if plan.slots > 1:
        return f"{plan.slots} parallel answers {each} ({short})"
    return f"one answer at a time ({short})"


def _candidate_classes(
    prefs: Preferences, automatic: Sequence[type[Backend]], named: Mapping[str, type[Backend]]
) -> list[type[Backend]]:
    if prefs.backend == "auto":
        return list(automatic)
    if prefs.backend == "cuda" and "llamacpp" in named:
        return [named["llamacpp"]]
    if prefs.backend in named:
        return [named[prefs.backend]]
    raise BackendUnavailable(
        f"There is no backend called {prefs.backend!r}.",
        f"Use one of: auto, cuda, {', '.join(sorted(named))}.",
    )


# --- llama.cpp: NVIDIA GPUs and the CPU ----------------------------------------------------------------------


def _wants_gpu(prefs: Preferences) -> bool:
    return prefs.backend == "cuda" or prefs.device.startswith("cuda") or bool(prefs.gpu_layers)


def _llamacpp_options(ctx: _Context, cls: type[Backend]) -> list[_Option]:
    prefs = ctx.prefs
    options: list[_Option] = []
    if prefs.device in ("auto", "cpu") and not _wants_gpu(prefs):
        options += _cpu_option(ctx, cls, RANK_CPU, LLAMACPP_CPU)
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


def _usable_gpus(ctx: _Context) -> list[GpuDevice]:
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


def _cpu_placement(ctx: _Context, memory: MemoryEstimate, layers: int) -> Placement:
    return Placement("CPU", ctx.inventory.cpu_model, layers, memory, ctx.inventory.ram_available_bytes)


def _gpu_full(ctx: _Context, gpus: Sequence[GpuDevice]) -> _Option | None:
    model, blocks = ctx.model, ctx.model.block_count
    for gpu in gpus:
        offload = estimate_offload(model, ctx.context, (blocks,), ctx.slots, ctx.kv_width)
        need = offload.gpus[0].total_bytes
        if need <= usable_bytes(gpu.free_bytes, GPU_HEADROOM_BYTES) and _cpu_fits(ctx, offload.cpu):
            placements = (
                Placement(gpu.id, gpu.name, blocks, offload.gpus[0], gpu.free_bytes),
                _cpu_placement(ctx, offload.cpu, 0),
            )
            reasons = (
                f"the whole model and its context cache fit on {gpu.name}: about {format_bytes(need)} of "
                f"{format_bytes(gpu.free_bytes)} free",
            )
            every = llama_gpu_layers(blocks, blocks)
            plan = _gpu_plan(ctx, "llama.cpp (CUDA)", placements, every, (), gpu.index, reasons)
            return _Option(RANK_GPU_FULL, plan, NVIDIA)
    return None


def _gpu_split(ctx: _Context, gpus: Sequence[GpuDevice]) -> _Option | None:
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
    if not _cpu_fits(ctx, offload.cpu):
        return None
    on_gpus = [
        Placement(g.id, g.name, n, memory, g.free_bytes)
        for g, n, memory in zip(ordered, counts, offload.gpus, strict=True)
    ]
    placements = (*on_gpus, _cpu_placement(ctx, offload.cpu, 0))
    share = tuple(round(n / blocks, 4) for n in counts)
    biggest = max(range(len(ordered)), key=lambda i: counts[i])
    reasons = (
        "no single GPU holds the model, but together they do: layers split "
        + " + ".join(f"{n} on {g.name}" for g, n in zip(ordered, counts, strict=True))
        + ", in proportion to free memory",
    )
    label = f"llama.cpp (CUDA, {len(ordered)} GPUs)"
    plan = _gpu_plan(ctx, label, placements, llama_gpu_layers(blocks, blocks), share, ordered[biggest].index, reasons)
    return _Option(RANK_GPU_SPLIT, plan, NVIDIA)


def _gpu_partial(ctx: _Context, gpu: GpuDevice) -> _Option | None:
    model, blocks = ctx.model, ctx.model.block_count
    # the output projection goes to the GPU with the layers (llama.cpp offloads it first): count it there
    room = usable_bytes(gpu.free_bytes, GPU_HEADROOM_BYTES)
    layers = layers_that_fit(model, ctx.context, room, slots=ctx.slots, kv_width=ctx.kv_width, with_output=True)
    if layers == 0:
        ctx.not_used.append(f"{_gpu_label(gpu)}: not even one layer fits")
        ctx.note(NVIDIA, ctx.not_used[-1])
        return None
    offload = estimate_offload(model, ctx.context, (layers,), ctx.slots, ctx.kv_width)
    if not _cpu_fits(ctx, offload.cpu):
        return None
    placements = (
        Placement(gpu.id, gpu.name, layers, offload.gpus[0], gpu.free_bytes),
        _cpu_placement(ctx, offload.cpu, blocks - layers),
    )
    reasons = (
        f"the model does not fit on {_gpu_label(gpu)}, so {layers} of {blocks} layers run there and the rest "
        "on the CPU (slower than all on the GPU; a smaller context or a lower-bit model would move more over)",
    )
    return _Option(
        RANK_GPU_PARTIAL,
        _gpu_plan(ctx, "llama.cpp (CPU + GPU)", placements, llama_gpu_layers(layers, blocks), (), gpu.index, reasons),
        NVIDIA,
    )


def _forced_layers(ctx: _Context, gpus: Sequence[GpuDevice], requested: int) -> list[_Option]:
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
        Placement(gpu.id, gpu.name, layers, offload.gpus[0], gpu.free_bytes),
        _cpu_placement(ctx, offload.cpu, blocks - layers),
    )
    reasons = (f"{layers} of {blocks} layers on {gpu.name}, as configured",)
    gpu_layers = llama_gpu_layers(layers, blocks)
    label = "llama.cpp (CUDA)" if layers >= blocks else "llama.cpp (CPU + GPU)"
    return [_Option(RANK_GPU_FULL, _gpu_plan(ctx, label, placements, gpu_layers, (), gpu.index, reasons), NVIDIA)]


def _gpu_plan(
    ctx: _Context,
    label: str,
    placements: tuple[Placement, ...],
    gpu_layers: int,
    tensor_split: tuple[float, ...],
    main_gpu: int,
    reasons: tuple[str, ...],
) -> BackendPlan:
    total = _sum_memory(p.memory for p in placements)
    return BackendPlan(
        backend="llamacpp",
        label=label,
        devices=tuple(p.device for p in placements if p.layers or p.device == "CPU"),
        threads=ctx.threads,
        context_length=ctx.context,
        memory=total,
        reasons=reasons,
        placements=placements,
        gpu_layers=gpu_layers,
        tensor_split=tensor_split,
        main_gpu=main_gpu,
        device=f"cuda:{main_gpu}",
        slots=ctx.slots,
        kv_cache_type=ctx.prefs.kv_cache_type,
    )


def _cpu_fits(ctx: _Context, memory: MemoryEstimate) -> bool:
    return memory.total_bytes <= usable_bytes(ctx.inventory.ram_available_bytes)


def _cpu_option(ctx: _Context, cls: type[Backend], rank: int, route: str) -> list[_Option]:
    """The model on the CPU, on ``cls``'s CPU path, priced by ``cls``'s own memory rule."""
    inventory, model = ctx.inventory, ctx.model
    slots = ctx.slots if cls.capabilities.parallel else 1

    def needs(context: int) -> MemoryEstimate:
        return cls.estimate_memory(
            model,
            LoadOptions(
                context_length=context, threads=ctx.threads, slots=slots, kv_cache_type=ctx.prefs.kv_cache_type
            ),
        )

    memory = needs(ctx.context)
    name, label = cls.name, cls.label
    usable = usable_bytes(inventory.ram_available_bytes)
    if memory.total_bytes > usable:
        fits_at = largest_context(model, lambda c: needs(c).total_bytes <= usable, ctx.context)
        failure = DoesNotFit(
            f"{model.display_name} needs about {format_bytes(memory.total_bytes)} (weights "
            f"{format_bytes(memory.weights_bytes)}, context cache {format_bytes(memory.kv_cache_bytes)}) but only "
            f"{format_bytes(inventory.ram_available_bytes)} of memory is available.",
            f"Lower the context to {fits_at} tokens or less (--context), close other programs, or choose a "
            "smaller or lower-bit model."
            if fits_at
            else "Close other programs, or choose a smaller or lower-bit model.",
            page_remedy="Close other programs, or pick a smaller or lower-bit model in the Models tab.",
        )
        failure.context_that_fits = fits_at or None
        ctx.memory_failures.append(failure)
        ctx.rejections.append(f"{label}: {failure.message}")
        ctx.note(route, failure.message)
        return []
    reasons = [
        f"needs about {format_bytes(memory.total_bytes)} of {format_bytes(inventory.ram_available_bytes)} available RAM"
    ]
    if "avx2" not in inventory.isa_flags and "asimd" not in inventory.isa_flags and "neon" not in inventory.isa_flags:
        reasons.append("this CPU has no AVX2, so llama.cpp uses slower kernels; a small, low-bit model helps")
    plan = BackendPlan(
        backend=name,
        label=label,
        devices=("CPU",),
        threads=ctx.threads,
        context_length=ctx.context,
        memory=memory,
        reasons=tuple(reasons),
        placements=(Placement("CPU", inventory.cpu_model, model.block_count, memory, inventory.ram_available_bytes),),
        device="CPU",
        slots=slots,
        kv_cache_type=ctx.prefs.kv_cache_type if name == "llamacpp" else "f16",
    )
    return [_Option(rank, plan, route)]


# --- OpenVINO: Intel GPU and NPU (and the CPU when asked for) -------------------------------------------------


def _openvino_options(ctx: _Context, cls: type[Backend]) -> list[_Option]:
    inventory, prefs = ctx.inventory, ctx.prefs
    devices = list(inventory.openvino or ())
    wanted = prefs.device.upper()
    if wanted not in ("AUTO", "CPU"):
        devices = [d for d in devices if d.id.upper() == wanted or d.kind == wanted]
        if not devices:
            known = ", ".join(d.id for d in inventory.openvino or ()) or "none"
            ctx.rejections.append(f"OpenVINO: there is no {prefs.device} device (OpenVINO sees: {known})")
            return []
    options: list[_Option] = []
    for device in devices:
        if device.kind == "CPU":
            if prefs.backend == "openvino" and wanted in ("AUTO", "CPU"):
                options += [_as_openvino(o, device) for o in _cpu_option(ctx, cls, RANK_OPENVINO_CPU, OPENVINO_CPU)]
            continue
        options += _openvino_accelerator(ctx, cls, device)
    return options


def _openvino_accelerator(ctx: _Context, cls: type[Backend], device: OpenVinoDevice) -> list[_Option]:
    model, inventory = ctx.model, ctx.inventory
    context, limits = ctx.context, ""
    if device.kind == "NPU":
        most = NPU_MAX_PROMPT_TOKENS + NPU_MIN_RESPONSE_TOKENS
        if context > most:
            context = most
            limits = (
                f"; the NPU compiles fixed shapes, so prompts are limited to {NPU_MAX_PROMPT_TOKENS} tokens "
                f"and the context to {most}"
            )
    memory = cls.estimate_memory(model, LoadOptions(context_length=context, threads=ctx.threads))
    route = NPU if device.kind == "NPU" else INTEL_GPU
    if memory.total_bytes > usable_bytes(inventory.ram_available_bytes):
        ctx.rejections.append(
            f"OpenVINO {device.id}: needs about {format_bytes(memory.total_bytes)} of shared memory, "
            f"{format_bytes(inventory.ram_available_bytes)} available"
        )
        ctx.note(route, ctx.rejections[-1].removeprefix(f"OpenVINO {device.id}: "))
        return []
    rank = RANK_NPU if device.kind == "NPU" else RANK_INTEL_GPU
    kind = "NPU" if device.kind == "NPU" else ("integrated GPU" if device.integrated else "GPU")
    reasons = (
        f"{device.full_name} ({kind}) runs {model.architecture} GGUF models through OpenVINO, using about "
        f"{format_bytes(memory.total_bytes)} of shared memory{limits}",
    )
    plan = BackendPlan(
        backend="openvino",
        label=f"OpenVINO ({device.id})",
        devices=(device.id,),
        threads=ctx.threads,
        context_length=context,
        memory=memory,
        reasons=reasons,
        placements=(Placement(device.id, device.full_name, model.block_count, memory, inventory.ram_available_bytes),),
        device=device.id,
    )
    return [_Option(rank, plan, route)]


def _as_openvino(option: _Option, device: OpenVinoDevice) -> _Option:
    plan = option.plan
    return _Option(
        option.rank,
        dataclasses.replace(plan, label=f"OpenVINO ({device.id})", device=device.id),
        option.route,
    )


def _sum_memory(parts: Iterable[MemoryEstimate]) -> MemoryEstimate:
    items = list(parts)
    return MemoryEstimate(
        sum(m.weights_bytes for m in items), sum(m.kv_cache_bytes for m in items), sum(m.compute_bytes for m in items)
    )
