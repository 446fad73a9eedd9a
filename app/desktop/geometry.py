"""The window's size, remembered between launches in the data folder (``window.json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.paths import write_private_text

DEFAULT_WIDTH, DEFAULT_HEIGHT = 1180, 820
MIN_WIDTH, MIN_HEIGHT = 720, 520
MAX_SIDE = 16384  # larger than any screen: a file with more was not written by Hearth


@dataclass(frozen=True)
class WindowSize:
    width: int = DEFAULT_WIDTH
    height: int = DEFAULT_HEIGHT


def sane_size(width: object, height: object) -> WindowSize:
    """``width`` × ``height`` held to what a window can be; the default for anything that is not a size."""
    if not isinstance(width, int) or not isinstance(height, int) or isinstance(width, bool) or isinstance(height, bool):
        return WindowSize()
    if width > MAX_SIDE or height > MAX_SIDE:
        return WindowSize()
    return WindowSize(max(width, MIN_WIDTH), max(height, MIN_HEIGHT))


def load_size(path: Path) -> WindowSize:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return WindowSize()
    if not isinstance(data, dict):
        return WindowSize()
    return sane_size(data.get("width"), data.get("height"))


def save_size(path: Path, size: WindowSize) -> None:
    write_private_text(path, json.dumps({"width": size.width, "height": size.height}))
