"""The one list of backends Hearth knows, in order of preference for automatic selection."""

from __future__ import annotations

from backends.base import Backend
from backends.fake import FakeBackend
from backends.llamacpp import LlamaCppBackend

# Automatic selection tries these in order; the fake backend is only used when asked for by name.
AUTOMATIC: tuple[type[Backend], ...] = (LlamaCppBackend,)
ALL: dict[str, type[Backend]] = {cls.name: cls for cls in (LlamaCppBackend, FakeBackend)}


def backend_names() -> list[str]:
    return sorted(ALL)
