"""Files added through the web page: the browser's upload lands in Gradio's temporary folder, which is cleaned up,
so Hearth keeps its own copy in the data directory (a folder per collection) and indexes that.

Uploading a file again with the same name and content changes nothing; the same name with new content replaces
the copy (a new version, re-indexed). Copies are written under a temporary name and renamed, so a crash never
leaves half a file under a real name.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from models.gguf import sha256_of

PARTIAL_SUFFIX = ".partial"
MAX_NAME_CHARS = 200


def safe_file_name(name: str) -> str:
    """A browser-supplied name reduced to a plain, visible file name (no folders, no leading dots)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip().lstrip(".").strip()
    if not base:
        return "upload"
    stem, dot, suffix = base.rpartition(".")
    if len(base) > MAX_NAME_CHARS:
        keep = MAX_NAME_CHARS - len(suffix) - 1
        base = f"{stem[:keep]}.{suffix}" if dot and keep > 0 else base[:MAX_NAME_CHARS]
    return base


def unique_names(names: Iterable[str]) -> list[str]:
    """Names for one batch of uploads, numbered where two files share a name ("notes (2).md")."""
    used: set[str] = set()
    result: list[str] = []
    for name in names:
        candidate, number = name, 2
        stem, dot, suffix = name.rpartition(".")
        while candidate.casefold() in used:
            candidate = f"{stem} ({number}).{suffix}" if dot and stem else f"{name} ({number})"
            number += 1
        used.add(candidate.casefold())
        result.append(candidate)
    return result


def keep_uploads(uploaded: Sequence[Path], folder: Path) -> list[Path]:
    """Copy ``uploaded`` into ``folder`` and return the copies, in the same order."""
    folder.mkdir(parents=True, exist_ok=True)
    copies: list[Path] = []
    for source, name in zip(uploaded, unique_names(safe_file_name(p.name) for p in uploaded), strict=True):
        target = folder / name
        if not _same_content(source, target):
            partial = folder / f".{name}{PARTIAL_SUFFIX}"
            shutil.copyfile(source, partial)
            partial.replace(target)
        copies.append(target)
    return copies


def discard_copy(path: Path, folder: Path) -> None:
    """Delete ``path`` if it is one of Hearth's own copies under ``folder``; anything else is left alone."""
    if path.resolve().is_relative_to(folder.resolve()):
        path.unlink(missing_ok=True)


def _same_content(source: Path, target: Path) -> bool:
    try:
        if target.stat().st_size != source.stat().st_size:
            return False
    except FileNotFoundError:
        return False
    return sha256_of(source) == sha256_of(target)
