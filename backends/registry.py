"""The one list of backends Hearth knows, in order of preference for automatic selection."""

from __future__ import annotations

from backends.base import Backend
from backends.fake import FakeBackend
from backends.llamacpp.backend import LlamaCppBackend
from backends.openvino.backend import OpenVinoBackend

# Automatic selection weighs the devices these can use (backends.selection has the policy); the fake backend is
# only used when asked for by name.
AUTOMATIC: tuple[type[Backend], ...] = (LlamaCppBackend, OpenVinoBackend)
ALL: dict[str, type[Backend]] = {cls.name: cls for cls in (LlamaCppBackend, OpenVinoBackend, FakeBackend)}


def backend_names() -> list[str]:
    return sorted(ALL)
