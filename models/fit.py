"""Whether a model fits this machine, as a traffic light: green runs fully on the chosen device with its cache at
the configured context; amber needs partial GPU offload or a smaller context; red does not fit at all, or cannot
run here (an architecture the installed llama.cpp does not know). Pure: it asks the backend selection, which knows
the memory planner, and is told which architectures llama.cpp knows."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from models.shared.errors import DoesNotFit, HearthError

if TYPE_CHECKING:
    from backends.base import Backend
    from backends.hardware import HardwareInventory
    from backends.plan import Preferences
    from models.gguf import ModelInfo

Level = Literal["green", "amber", "red"]
SMALLEST_CONTEXT = 256


@dataclass(frozen=True)
class FitVerdict:
    level: Level
    summary: str
    runnable: bool = True  # False: no backend here can run this model at all, whatever the memory


def cannot_run(reason: str) -> FitVerdict:
    return FitVerdict("red", reason, runnable=False)


def fit_verdict(
    inventory: HardwareInventory,
    model: ModelInfo,
    prefs: Preferences,
    automatic: Sequence[type[Backend]],
    named: Mapping[str, type[Backend]],
    llama_architectures: frozenset[str] | None = None,
) -> FitVerdict:
    """``llama_architectures``: the names the installed llama.cpp loads (None: unknown, every name is assumed)."""
    from backends.selection import select_backend
    from models.shared.wording import format_bytes

    unknown = llama_architectures is not None and model.architecture not in llama_architectures
    unknown_reason = f"llama.cpp in this Hearth does not know the architecture {model.architecture!r}"
    try:
        plan = select_backend(inventory, model, prefs, automatic, named)
    except DoesNotFit:
        if unknown:
            return cannot_run(unknown_reason)
        try:
            small = dataclasses.replace(prefs, context_length=SMALLEST_CONTEXT)
            select_backend(inventory, model, small, automatic, named)
        except HearthError as exc:
            return FitVerdict("red", exc.message)  # shown after "no" (the page) or a red mark (the terminal)
        return FitVerdict("amber", f"fits only with a context below {prefs.context_length} tokens")
    except HearthError as exc:  # no backend here can run it (not installed, unsupported type or device)
        return cannot_run(unknown_reason if unknown else exc.message)
    runs_on = named.get(plan.backend)
    if unknown and runs_on is not None and runs_on.capabilities.listed_architectures:
        return cannot_run(unknown_reason)
    where = f"{plan.label}, about {format_bytes(plan.memory.total_bytes)} at {plan.context_length} tokens"
    if plan.partly_on_gpu:
        return FitVerdict("amber", f"partly on the GPU: {where}")
    return FitVerdict("green", where)  # shown after "yes" (the page) or a green mark (the terminal)
