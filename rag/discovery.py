"""Which files to consider for a collection: the paths given, and every regular file in the folders given.

Anything that cannot be read is still listed, with the reason, so that it shows in the collection's file list and
the rest of the folder is indexed: a symbolic link that loops (``ln -s b a; ln -s a b``) or leads nowhere, a file
or folder Hearth may not open, a named pipe or device (reading one could wait forever), a link that leads out of
the folder. Hidden entries (names starting with a dot) are left out, as the file manager does.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

NOT_FOUND = "not found"
_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


@dataclass(frozen=True)
class Candidate:
    path: Path
    root: Path | None
    problem: str | None = None


def unreadable_reason(exc: OSError, is_link: bool, is_folder: bool = False) -> str:
    """Why an entry cannot be read, in words a person can act on."""
    if exc.errno == errno.ELOOP:
        return "it is a symbolic link that leads back to itself (a loop); it was not read. Remove or fix the link"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        if is_link:
            return "it is a symbolic link to something that does not exist; it was not read. Remove or fix the link"
        return NOT_FOUND
    if exc.errno in (errno.EACCES, errno.EPERM):
        if is_folder:
            return "Hearth may not open this folder (permission denied); nothing in it was read"
        return "Hearth may not read it (permission denied); it was not read. Change its permissions to add it"
    what = "this folder" if is_folder else "it"
    return f"{what} cannot be read ({exc.strerror or exc}); it was not read"


def special_kind(mode: int) -> str | None:
    """'a named pipe', 'a device', … for entries that are not regular files or folders; ``None`` otherwise."""
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), None)


def discover(paths: Sequence[Path]) -> tuple[list[Candidate], list[Path]]:
    """Files to consider and the folders that were walked (whose vanished files should be removed)."""
    found: list[Candidate] = []
    roots: list[Path] = []
    for given in paths:
        path = given.expanduser()
        target, problem = _inspect(path)
        if problem is not None:
            found.append(Candidate(path.absolute(), None, problem))
        elif target.is_dir():
            roots.append(target)
            found.extend(_walk(target))
        else:
            found.append(Candidate(target, None))
    return found, roots


def _inspect(entry: Path, root: Path | None = None) -> tuple[Path, str | None]:
    """Where ``entry`` leads, and why it cannot be indexed (``None`` when it is a regular file or a folder)."""
    try:
        target = Path(os.path.realpath(entry, strict=True))
        mode = target.stat().st_mode
    except OSError as exc:
        return entry, unreadable_reason(exc, entry.is_symlink())
    if root is not None and not target.is_relative_to(root):
        return target, f"it links outside {root.name}/ (to {target}); it was not read"
    kind = special_kind(mode)
    if kind is not None:
        return target, f"it is {kind}, not a regular file; it was not read"
    return target, None


def _walk(root: Path) -> Iterator[Candidate]:
    unopened: list[OSError] = []
    for folder, dirs, files in os.walk(root, onerror=unopened.append, followlinks=False):
        yield from _unopened_folders(unopened, root)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            entry = Path(folder) / name
            _, problem = _inspect(entry, root)
            yield Candidate(entry, root, problem)
    yield from _unopened_folders(unopened, root)


def _unopened_folders(errors: list[OSError], root: Path) -> Iterator[Candidate]:
    while errors:
        exc = errors.pop(0)
        if exc.filename:
            yield Candidate(Path(exc.filename), root, unreadable_reason(exc, is_link=False, is_folder=True))
