"""The one list of backends Hearth knows, in order of preference for automatic selection, and the one list of what a
user may ask for (``--backend``, the setting, the Hardware tab), each backend's own choices in its order."""

from __future__ import annotations

from backends.base import Backend, BackendChoice
from backends.fake import FakeBackend
from backends.hardware import HardwareInventory
from backends.llamacpp.backend import LlamaCppBackend
from backends.openvino.backend import OpenVinoBackend

# Automatic selection weighs the devices these can use (backends.selection has the policy); the fake backend is
# only used when asked for by name.
AUTOMATIC: tuple[type[Backend], ...] = (LlamaCppBackend, OpenVinoBackend)
ALL: dict[str, type[Backend]] = {cls.name: cls for cls in (LlamaCppBackend, OpenVinoBackend, FakeBackend)}
AUTO = BackendChoice("auto", "Automatic (best for this machine)")


def choices(offered: bool = False) -> list[BackendChoice]:
    """ "auto" and every backend's choices; ``offered``: only those of the backends automatic selection weighs (the
    page leaves the demo backend out)."""
    backends = AUTOMATIC if offered else tuple(ALL.values())
    return [AUTO, *(choice for cls in backends for choice in cls.choices)]


def choice_names() -> list[str]:
    return [choice.name for choice in choices()]


def choice_named(name: str) -> BackendChoice | None:
    return next((choice for choice in choices() if choice.name == name), None)


def unavailable_reason(inventory: HardwareInventory, name: str) -> str | None:
    """Why the choice ``name`` cannot run anything on this machine; None when it can, or for "auto"."""
    owner = next((cls for cls in ALL.values() if any(choice.name == name for choice in cls.choices)), None)
    return owner.unavailable(inventory, name) if owner is not None else None
