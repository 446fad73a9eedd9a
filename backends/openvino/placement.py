"""Where OpenVINO can run a model on this machine: its proposals for ``backends/selection.py``. Pure.

An Intel GPU, then an Intel NPU, when OpenVINO's GGUF reader knows the model's architecture and weights; an NPU
compiles fixed shapes, so its prompt and context are capped. The CPU only when the user asks for OpenVINO: llama.cpp
runs a model on the CPU as fast or faster (``backends/plan_reasons.py`` has the measurements); the plan still says
what OpenVINO on the CPU would give here.
"""

from __future__ import annotations

import dataclasses

from backends.base import Backend, LoadOptions
from backends.hardware import OpenVinoDevice
from backends.memory import format_bytes, usable_bytes
from backends.placement import RANK_INTEL_GPU, RANK_NPU, RANK_OPENVINO_CPU, cpu_option
from backends.plan import BackendPlan, Placement, PlanContext, PlanOption, openvino_device
from backends.plan_reasons import INTEL_GPU, LLAMACPP_CPU, NPU, OPENVINO_CPU, comes_after, openvino_cpu_reason

# The NPU's static shapes: the longest prompt it compiles for, and the answer room it keeps.
NPU_MAX_PROMPT_TOKENS = 1024
NPU_MIN_RESPONSE_TOKENS = 256


def propose(ctx: PlanContext, cls: type[Backend]) -> list[PlanOption]:
    """OpenVINO's options here: its accelerators, and the CPU when the user asked for OpenVINO."""
    return _openvino_options(ctx, cls)


def idle_accelerators(ctx: PlanContext) -> list[str]:
    """The Intel GPUs and NPUs that sit idle when OpenVINO cannot run the model."""
    return [d.full_name for d in ctx.inventory.openvino or () if d.accelerator]


def cpu_route_reason(ctx: PlanContext, cls: type[Backend], chosen: PlanOption) -> str | None:
    """OpenVINO on the CPU runs only when asked for: say whether it could, and what it would gain (None when OpenVINO
    sees no CPU)."""
    if not any(device.kind == "CPU" for device in ctx.inventory.openvino or ()):
        return None
    scratch = dataclasses.replace(ctx, rejections=[], not_used=[], memory_failures=[], route_notes={})
    if not cpu_option(scratch, cls, RANK_OPENVINO_CPU, OPENVINO_CPU):
        return scratch.route_notes.get(OPENVINO_CPU, "the model does not fit in the memory available")
    if chosen.route != LLAMACPP_CPU:
        return comes_after(chosen.plan.label)
    return openvino_cpu_reason(ctx.inventory.isa_flags)


def _openvino_options(ctx: PlanContext, cls: type[Backend]) -> list[PlanOption]:
    inventory, prefs = ctx.inventory, ctx.prefs
    devices = list(inventory.openvino or ())
    wanted = prefs.device.upper()
    if wanted not in ("AUTO", "CPU"):
        devices = [d for d in devices if d.id.upper() == wanted or d.kind == wanted]
        if not devices:
            known = ", ".join(d.id for d in inventory.openvino or ()) or "none"
            ctx.rejections.append(f"OpenVINO: there is no {prefs.device} device (OpenVINO sees: {known})")
            return []
    options: list[PlanOption] = []
    for device in devices:
        if device.kind == "CPU":
            if prefs.backend == "openvino" and wanted in ("AUTO", "CPU"):
                options += [_as_openvino(o, device) for o in cpu_option(ctx, cls, RANK_OPENVINO_CPU, OPENVINO_CPU)]
            continue
        options += _openvino_accelerator(ctx, cls, device)
    return options


def _openvino_accelerator(ctx: PlanContext, cls: type[Backend], device: OpenVinoDevice) -> list[PlanOption]:
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
        threads=ctx.threads,
        context_length=context,
        memory=memory,
        reasons=reasons,
        placements=(
            Placement(
                openvino_device(device.id), device.full_name, model.block_count, memory, inventory.ram_available_bytes
            ),
        ),
        device=device.id,
    )
    return [PlanOption(rank, plan, route)]


def _as_openvino(option: PlanOption, device: OpenVinoDevice) -> PlanOption:
    plan = option.plan
    return PlanOption(
        option.rank,
        dataclasses.replace(plan, label=f"OpenVINO ({device.id})", device=device.id),
        option.route,
    )
