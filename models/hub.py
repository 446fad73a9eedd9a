"""GGUF files on the Hugging Face Hub, named ``hf:OWNER/REPO/FILE.gguf``. Pure: reading such a name, and what the hub's
listing of a repository says about one of its files (its size and the SHA-256 its bytes must have).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from models.catalog import CatalogError
from models.gguf_split import split_name
from models.shared.wording import format_bytes

PREFIX = "hf:"
# The hub's own rule for an owner or repository name: letters, digits, '-', '_', '.', not starting with '-' or '.'.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class HubError(CatalogError):
    """Something about installing from the Hugging Face Hub, said with what to do."""


class HubNameInvalid(HubError):
    """The name is not ``hf:OWNER/REPO/FILE.gguf``."""


class HubUnreachable(HubError):
    """The hub (or the mirror ``HF_ENDPOINT`` names) cannot be reached."""


class HubNotFound(HubError):
    """No such repository, or no such file in it."""


class HubAccessRefused(HubError):
    """The repository is gated or private and the hub refused this account (or no account)."""


class HubFileRefused(HubError):
    """The file cannot be installed: its bytes do not match its SHA-256, or it is not a file Hearth can use."""


@dataclass(frozen=True)
class HubFile:
    repo: str  # OWNER/REPO
    filename: str  # its path inside the repository; empty when only the repository was named

    @property
    def reference(self) -> str:
        return f"{PREFIX}{self.repo}/{self.filename}" if self.filename else f"{PREFIX}{self.repo}"


@dataclass(frozen=True)
class HubFacts:
    """What the hub's listing says of one file: its size, and the SHA-256 of its bytes (Git LFS keeps it)."""

    size: int
    sha256: str


@dataclass(frozen=True)
class HubListing:
    """A repository the search found, with its GGUF files (name and size), smallest first."""

    repo: str
    files: tuple[tuple[str, int], ...]


# A quantization as GGUF publishers write it in file names: Q4_K_M, Q8_0, IQ4_XS, F16, BF16.
_QUANTIZATION = re.compile(r"(?:^|[-_.])((?:IQ|Q)\d(?:_[A-Z0-9]+)*|BF16|F16|F32)(?=[-_.])", re.IGNORECASE)


def quantization_of(filename: str) -> str:
    """The quantization a file's name gives (``Q4_K_M``), or an empty string."""
    found = _QUANTIZATION.findall(filename.rsplit("/", 1)[-1])
    return found[-1].upper() if found else ""


def gguf_files(siblings: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, int], ...]:
    """The GGUF models of a repository's listing with their sizes, smallest first: each single file, and each model
    split into several files as its first part with the size of all its parts (one whose parts are not all listed
    is left out)."""
    sizes: dict[str, int] = {}
    for entry in siblings:
        name = str(entry.get("rfilename", ""))
        lfs = entry.get("lfs") or {}
        size = lfs.get("size", entry.get("size"))
        if name.lower().endswith(".gguf") and isinstance(size, int) and size > 0:
            sizes[name] = size
    found = []
    for name, size in sizes.items():
        split = split_name(name.rsplit("/", 1)[-1])
        if split is None:
            found.append((name, size))
            continue
        if split.number != 1:
            continue  # counted with its first part
        folder = name[: len(name) - len(name.rsplit("/", 1)[-1])]
        parts = [folder + part for part in split.parts]
        if all(part in sizes for part in parts):
            found.append((name, sum(sizes[part] for part in parts)))
    return tuple(sorted(found, key=lambda item: (item[1], item[0])))


def part_files(hub_file: HubFile) -> list[HubFile]:
    """The files to download for ``hub_file``: itself, or every part of a split model named by its first part."""
    name = hub_file.filename.rsplit("/", 1)[-1]
    split = split_name(name)
    if split is None:
        return [hub_file]
    folder = hub_file.filename[: len(hub_file.filename) - len(name)]
    return [HubFile(hub_file.repo, folder + part) for part in split.parts]


def is_hub_reference(text: str) -> bool:
    return text.strip().lower().startswith(PREFIX)


def parse_reference(text: str) -> HubFile:
    """``hf:OWNER/REPO/FILE.gguf`` read into its repository and file, or :class:`HubNameInvalid` saying what is
    wrong with it."""
    example = (
        "hf:OWNER/REPO/FILE.gguf, for example hf:bartowski/Qwen2.5-7B-Instruct-GGUF/Qwen2.5-7B-Instruct-Q4_K_M.gguf"
    )
    body = text.strip()[len(PREFIX) :] if is_hub_reference(text) else text.strip()
    parts = body.split("/")
    if len(parts) < 2 or not all(parts):
        raise HubNameInvalid(
            f"{text.strip()!r} does not name a repository or a file on the hub.",
            f"Name one as {example}, or a repository alone (hf:OWNER/REPO) to have the file that fits picked.",
        )
    owner, name, path = parts[0], parts[1], parts[2:]
    for part in (owner, name):
        if not _NAME.fullmatch(part):
            raise HubNameInvalid(
                f"{part!r} is not a hub owner or repository name (letters, digits, '-', '_' and '.').",
                f"Name the file as {example}.",
            )
    if not path:
        return HubFile(f"{owner}/{name}", "")  # the repository alone: the file is picked for this computer
    if any(p in (".", "..") or "\\" in p for p in path):
        raise HubNameInvalid(f"{'/'.join(path)!r} is not a file inside the repository.", f"Name it as {example}.")
    filename = "/".join(path)
    if not filename.lower().endswith(".gguf"):
        raise HubNameInvalid(
            f"{filename!r} is not a GGUF file; Hearth runs GGUF models.",
            "Pick a .gguf file of the repository (its Files tab on the hub lists them).",
        )
    split = split_name(filename.rsplit("/", 1)[-1])
    if split is not None and split.number != 1:
        raise HubNameInvalid(
            f"{filename} is part {split.number} of a model split into {split.count} files.",
            f"Name its first part, {split.part(1)}: Hearth downloads every part and installs them as one model.",
        )
    return HubFile(f"{owner}/{name}", filename)


def facts_of(hub_file: HubFile, siblings: Iterable[Mapping[str, Any]]) -> HubFacts:
    """The size and SHA-256 the repository's listing (its ``siblings``, with their LFS metadata) gives the file;
    :class:`HubNotFound` naming the GGUF files it has instead, or :class:`HubFileRefused` when the listing gives no
    SHA-256 to check the bytes against."""
    listed = list(siblings)
    entry = next((s for s in listed if s.get("rfilename") == hub_file.filename), None)
    if entry is None:
        ggufs = sorted(str(s.get("rfilename")) for s in listed if str(s.get("rfilename", "")).lower().endswith(".gguf"))
        shown = ", ".join(ggufs[:12]) + (f" and {len(ggufs) - 12} more" if len(ggufs) > 12 else "")
        raise HubNotFound(
            f"{hub_file.repo} has no file {hub_file.filename}.",
            f"Its GGUF files: {shown}."
            if ggufs
            else f"{hub_file.repo} has no GGUF files; pick a repository that does.",
        )
    lfs = entry.get("lfs") or {}
    sha, size = str(lfs.get("sha256", "")).lower(), lfs.get("size", entry.get("size"))
    if not _SHA256.fullmatch(sha) or not isinstance(size, int) or size <= 0:
        raise HubFileRefused(
            f"The hub gives no SHA-256 for {hub_file.filename}, so its bytes cannot be checked.",
            "Download it yourself and add it with `hearth models import PATH` if you trust where it came from.",
            page_remedy="Download it yourself and add it under Import in the Models tab if you trust where it came "
            "from.",
        )
    return HubFacts(size, sha)


# The quantizations picked for a repository named alone, best first: Q4_K_M is the usual balance of quality, size and
# speed on a CPU; then the next larger ones, then the smaller ones that still keep a model useful.
PREFERRED = ("Q4_K_M", "Q5_K_M", "Q4_K_S", "Q5_K_S", "Q6_K", "Q8_0", "IQ4_XS", "Q4_0", "IQ4_NL", "Q3_K_L", "Q3_K_M")


def pick_file(
    hub_file: HubFile, files: Iterable[tuple[str, int]], memory_free: int, overhead: float
) -> tuple[HubFile, str]:
    """The file of a repository named alone that suits this computer, and why: the first quantization of
    :data:`PREFERRED` whose file fits in ``memory_free`` (a model takes about ``overhead`` times its file's size
    once loaded); :class:`HubNotFound` when none fits or the repository has no single-file GGUF."""
    listed = list(files)
    if not listed:
        raise HubNotFound(
            f"{hub_file.repo} has no GGUF file Hearth can install.",
            "Pick a repository whose name ends in -GGUF (`hearth models search TEXT` lists them).",
            page_remedy="Pick a repository whose name ends in -GGUF.",
        )
    by_kind = {quantization_of(name): (name, size) for name, size in sorted(listed, key=lambda f: f[1])}
    for kind in PREFERRED:
        if kind in by_kind and by_kind[kind][1] * overhead <= memory_free:
            name, size = by_kind[kind]
            first = kind == PREFERRED[0]
            why = (
                f"{kind}, the usual balance of quality and speed"
                if first
                else f"{kind}, the best of its files that fits ({PREFERRED[0]} does not, or the repository has none)"
            )
            needs, free = format_bytes(int(size * overhead)), format_bytes(memory_free)
            return HubFile(hub_file.repo, name), f"{why}: it needs about {needs} of the {free} free"
    smallest, size = min(listed, key=lambda f: f[1])
    raise HubNotFound(
        f"None of {hub_file.repo}'s files fits in the {format_bytes(memory_free)} of memory free now (the smallest, "
        f"{smallest}, needs about {format_bytes(int(size * overhead))}).",
        "Close other programs, or pick a smaller model (`hearth models available` says which fit).",
        page_remedy="Close other programs, or pick a smaller model (the Models tab says which fit).",
    )
