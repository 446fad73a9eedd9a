"""Decide where a model runs on this machine — backend, devices, layers per device, threads, context — and say
why in plain words. Pure: it reads a hardware inventory and model metadata, never the hardware itself.

Each backend proposes where it can run the model (``Backend.propose``; the shared pieces are in
``backends/placement.py``); this module only gathers the proposals, takes the best ranked, and explains the choice
and every route it weighed and did not take. The policy, best first:
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
from collections.abc import Mapping, Sequence

from backends.base import Backend
from backends.hardware import HardwareInventory
from backends.placement import (
    RANK_GPU_PARTIAL,
    RANK_GPU_SPLIT,
    choose_context,
    choose_threads,
    kv_cache_reason,
    slot_counts,
)
from backends.plan import BackendPlan, NoBackend, PlanContext, PlanOption, Preferences
from backends.plan_reasons import ROUTES, comes_after, missing_device_reason, not_chosen, rank_why
from models.gguf import ModelInfo
from models.shared.errors import BackendUnavailable


def select_backend(
    inventory: HardwareInventory,
    model: ModelInfo,
    prefs: Preferences,
    automatic: Sequence[type[Backend]],
    named: Mapping[str, type[Backend]],
) -> BackendPlan:
    classes = candidate_classes(prefs.backend, automatic, named)
    context, context_reason = choose_context(model, prefs.context_length)
    threads, threads_reason = choose_threads(inventory, prefs.threads)
    # Parallel answers multiply the KV cache. Fewer of them never beat a faster placement: the best placement
    # any count allows wins, with as many answers as still fit there.
    chosen: tuple[PlanOption, PlanContext, list[PlanOption]] | None = None
    ctx: PlanContext | None = None
    for slots in slot_counts(prefs.slots):
        ctx = PlanContext(inventory, model, prefs, context, context_reason, threads, threads_reason, slots)
        options = gather(ctx, classes)
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
    runs_it = [cls for cls in classes if cls.name == best.backend]
    slots_reason = _slots_reason(best, prefs.slots, any(cls.capabilities.parallel for cls in runs_it))
    cache_reason = (
        (kv_cache_reason(best.kv_cache_type),) if any(cls.capabilities.cache_types for cls in runs_it) else ()
    )
    return dataclasses.replace(
        best, reasons=(headline, *best.reasons, *others, threads_reason, context_reason, slots_reason, *cache_reason)
    )


def gather(ctx: PlanContext, classes: Sequence[type[Backend]]) -> list[PlanOption]:
    """Every option the backends that can run the model here propose; why the others cannot is noted in ``ctx``."""
    options: list[PlanOption] = []
    for cls in classes:
        available = cls.availability(ctx.inventory)
        if not available.ok:
            ctx.rejections.append(f"{cls.label}: {available.reason} ({available.remedy})")
            for route in cls.routes:
                ctx.note(route, f"{available.reason} ({available.remedy})")
            continue
        support = cls.supports(ctx.model)
        if not support.ok:
            ctx.rejections.append(f"{cls.label}: {support.reason}")
            if idle := cls.idle_devices(ctx):
                ctx.not_used.append(f"{', '.join(idle)}: {support.reason}")
            mixed_in = f" ({ctx.model.quantization} mixes them in)" if support.reason.endswith(" weights") else ""
            for route in cls.routes:
                ctx.note(route, f"{support.reason}{mixed_in}")
            continue
        options += cls.propose(ctx)
    return options


def explain_alternatives(
    ctx: PlanContext, classes: Sequence[type[Backend]], options: Sequence[PlanOption], chosen: PlanOption
) -> list[str]:
    """One line per route automatic selection weighed and did not take, with the measured or known reason."""
    weighed = {route: cls for cls in classes for route in cls.routes}
    viable = {option.route for option in options}
    said: list[tuple[tuple[str, ...], str]] = []
    for route in ROUTES:
        if route == chosen.route or route not in weighed:
            continue
        if route in viable:
            reason = comes_after(chosen.plan.label)
        elif route in ctx.route_notes:
            reason = ctx.route_notes[route]
        else:
            own = weighed[route].route_reason(ctx, route, chosen)
            reason = own if own is not None else missing_device_reason(route, ctx.inventory)
        if said and said[-1][1] == reason:  # one line for routes turned down for the same reason
            said[-1] = ((*said[-1][0], route), reason)
        else:
            said.append(((route,), reason))
    return [not_chosen(routes, reason) for routes, reason in said]


def candidate_classes(
    asked: str, automatic: Sequence[type[Backend]], named: Mapping[str, type[Backend]]
) -> list[type[Backend]]:
    """The backends weighed for what the user asked for: every automatic one, or the one whose choice it is."""
    if asked == "auto":
        return list(automatic)
    chosen = [cls for cls in named.values() if any(choice.name == asked for choice in cls.choices)]
    if chosen:
        return chosen[:1]
    raise BackendUnavailable(
        f"There is no backend called {asked!r}.",
        f"Use one of: auto, {', '.join(choice.name for cls in named.values() for choice in cls.choices)}.",
    )


def _rank_why(option: PlanOption) -> str:
    return rank_why(option.route, split=option.rank == RANK_GPU_SPLIT, partial=option.rank == RANK_GPU_PARTIAL)


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
