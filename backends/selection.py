"""Decide which backend runs a model here, with what threads and context, and say why. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.errors import BackendUnavailable, DoesNotFit
from backends.base import Backend, LoadOptions
from backends.hardware import HardwareInventory
from backends.memory import MemoryEstimate, check_fits, format_bytes
from models.gguf import ModelInfo


@dataclass(frozen=True)
class Preferences:
    """What the user asked for; ``auto`` and ``None`` leave the choice to Hearth."""

    backend: str = "auto"
    threads: int | None = None
    context_length: int = 4096


@dataclass(frozen=True)
class BackendPlan:
    backend: str
    label: str
    devices: tuple[str, ...]
    threads: int
    context_length: int
    memory: MemoryEstimate
    reasons: tuple[str, ...]

    def load_options(self, seed: int = 0) -> LoadOptions:
        return LoadOptions(context_length=self.context_length, threads=self.threads, seed=seed)


class NoBackend(BackendUnavailable):
    def __init__(self, rejections: Sequence[str]) -> None:
        super().__init__(
            "No backend can run this model here: " + "; ".join(rejections) + ".",
            "Fix one of the reasons above, or choose another model.",
        )
        self.rejections = tuple(rejections)


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
    if prefs.backend == "auto":
        candidates = list(automatic)
    elif prefs.backend in named:
        candidates = [named[prefs.backend]]
    else:
        raise BackendUnavailable(
            f"There is no backend called {prefs.backend!r}.",
            f"Use one of: auto, {', '.join(sorted(named))}.",
        )
    context, context_reason = choose_context(model, prefs.context_length)
    threads, threads_reason = choose_threads(inventory, prefs.threads)
    options = LoadOptions(context_length=context, threads=threads)
    rejections: list[str] = []
    memory_failures: list[DoesNotFit] = []
    for cls in candidates:
        available = cls.availability(inventory)
        if not available.ok:
            rejections.append(f"{cls.label}: {available.reason} ({available.remedy})")
            continue
        support = cls.supports(model)
        if not support.ok:
            rejections.append(f"{cls.label}: {support.reason}")
            continue
        estimate = cls.estimate_memory(model, options)
        try:
            check_fits(estimate, inventory.ram_available_bytes, model.display_name)
        except DoesNotFit as exc:
            memory_failures.append(exc)
            rejections.append(f"{cls.label}: {exc.message}")
            continue
        why_this = "chosen by you" if prefs.backend != "auto" else "the first available backend that fits"
        return BackendPlan(
            backend=cls.name,
            label=cls.label,
            devices=("CPU",),
            threads=threads,
            context_length=context,
            memory=estimate,
            reasons=(
                f"{cls.label}: {why_this}; {available.reason}",
                support.reason,
                f"needs about {format_bytes(estimate.total_bytes)} of "
                f"{format_bytes(inventory.ram_available_bytes)} available RAM",
                threads_reason,
                context_reason,
            ),
        )
    if len(memory_failures) == len(candidates) == 1:
        raise memory_failures[0]
    raise NoBackend(rejections)
