"""The rules every backend's proposals share: the context and threads a plan uses, how many answers at once to
try, the model on the CPU priced by a backend's own memory rule, and the ranks of the options. Pure. (What a plan is
made of — ``Preferences``, ``Device``, ``Placement``, ``BackendPlan``, ``PlanOption``, ``PlanContext`` — is the
contract's ``backends/plan.py``.)

Each backend proposes its own options for a machine (``Backend.propose``: llama.cpp in
``backends/llamacpp/placement.py``, OpenVINO in ``backends/openvino/placement.py``); ``backends/selection.py``
gathers them, ranks them and says why. The ranks, best first: a GPU that holds the whole model, several GPUs together,
part of the model on a GPU, an Intel GPU, an NPU, the CPU with llama.cpp, the CPU with OpenVINO (only when asked for).
"""

from __future__ import annotations

from collections.abc import Iterable

from backends.base import Backend, LoadOptions
from backends.hardware import HardwareInventory
from backends.memory import KV_WIDTHS, MIB, MemoryEstimate, format_bytes, largest_context, usable_bytes
from backends.plan import CPU, BackendPlan, Placement, PlanContext, PlanOption
from models.gguf import ModelInfo
from models.shared.errors import DoesNotFit

GPU_HEADROOM_BYTES = 400 * MIB

RANK_GPU_FULL, RANK_GPU_SPLIT, RANK_GPU_PARTIAL, RANK_INTEL_GPU, RANK_NPU, RANK_CPU, RANK_OPENVINO_CPU = range(7)


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


def slot_counts(requested: int) -> list[int]:
    """The parallel answer counts to try, most first: the request, then halving down to one."""
    counts = [max(requested, 1)]
    while counts[-1] > 1:
        counts.append(counts[-1] // 2)
    return counts


def kv_cache_reason(kv_cache_type: str) -> str:
    width = KV_WIDTHS[kv_cache_type]
    if kv_cache_type == "f16":
        return "context cache in f16 (2 bytes a value; --kv-cache q8_0 or q4_0 takes less memory)"
    said = f"context cache in {kv_cache_type} ({width:.2f} bytes a value, with flash attention), as configured"
    if kv_cache_type == "q4_0":
        # bench/data/kv-cache.json: Qwen2.5-Coder-1.5B's perplexity went from 1.42 (f16) to 1297 with q4_0
        said += "; q4_0 can ruin some models' answers (Qwen2.5 here), q8_0 is the safe saving"
    return said


def cpu_placement(ctx: PlanContext, memory: MemoryEstimate, layers: int) -> Placement:
    return Placement(CPU, ctx.inventory.cpu_model, layers, memory, ctx.inventory.ram_available_bytes)


def cpu_fits(ctx: PlanContext, memory: MemoryEstimate) -> bool:
    return memory.total_bytes <= usable_bytes(ctx.inventory.ram_available_bytes)


def cpu_option(ctx: PlanContext, cls: type[Backend], rank: int, route: str) -> list[PlanOption]:
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
        threads=ctx.threads,
        context_length=ctx.context,
        memory=memory,
        reasons=tuple(reasons),
        placements=(Placement(CPU, inventory.cpu_model, model.block_count, memory, inventory.ram_available_bytes),),
        device="CPU",
        slots=slots,
        kv_cache_type=ctx.prefs.kv_cache_type if cls.capabilities.cache_types else "f16",
    )
    return [PlanOption(rank, plan, route)]


def sum_memory(parts: Iterable[MemoryEstimate]) -> MemoryEstimate:
    items = list(parts)
    return MemoryEstimate(
        sum(m.weights_bytes for m in items), sum(m.kv_cache_bytes for m in items), sum(m.compute_bytes for m in items)
    )
