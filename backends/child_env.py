"""The environment Hearth's own child processes start in (the engine, the reader, a tuning run, the speed
measurement): the parent's, with this checkout first on the import path, since each child runs one of Hearth's
modules with ``python -m`` whether or not the project is installed."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def child_environment(**defaults: str) -> dict[str, str]:
    """The parent's environment with the project root put first on ``PYTHONPATH``; ``defaults`` are set where the
    parent has not set them itself."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    for key, value in defaults.items():
        env.setdefault(key, value)
    return env
