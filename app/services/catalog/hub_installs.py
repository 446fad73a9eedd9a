"""Installing a GGUF file from the Hugging Face Hub (``hf:OWNER/REPO/FILE.gguf``): asked for by name, the one time
Hearth reaches the hub. The hub's listing gives the file's size and SHA-256; the download goes on from an earlier
run's partial file; the bytes are checked against the SHA-256, then against Hearth's own GGUF checks, and only then
is the model registered like any other. A file refused at any step leaves nothing behind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.services.container import person_keeps_hub_offline
from app.services.serving.runtime import available_memory
from backends.base import CancelToken
from models.catalog import RUNTIME_OVERHEAD
from models.hub import (
    HubFile,
    HubListing,
    HubNameInvalid,
    HubUnreachable,
    facts_of,
    gguf_files,
    parse_reference,
    part_files,
    pick_file,
)
from models.hub_download import check_space, fetch, listing, search
from models.install import InstallProgress
from models.shared.errors import HearthError
from models.store import ModelStore, StoredModel, free_file, free_folder

_SHA256 = re.compile(r"[0-9a-f]{64}")
DOWNLOADS = ".downloads"  # in the models folder: partial files kept for the next run, owner-only


@dataclass(frozen=True)
class HubPicked:
    """The file picked for this computer from a repository named alone, and why."""

    hub_file: HubFile
    why: str


@dataclass(frozen=True)
class HubInstalled:
    stored: StoredModel
    hub_file: HubFile
    already: bool = False  # installed before (the same bytes); nothing was done


def partial_file(models_dir: Path, sha256: str) -> Path:
    """Where the bytes of the file with this SHA-256 gather until it is whole."""
    return models_dir / DOWNLOADS / f"{sha256}.partial"


@dataclass(frozen=True)
class Unfinished:
    """A download an earlier install left unfinished (cut off, cancelled, or Hearth stopped): installing the same
    reference again goes on from ``have`` bytes."""

    reference: str
    have: int
    size: int


def _note_of(partial: Path) -> Path:
    return partial.with_suffix(".json")


def unfinished_downloads(models_dir: Path) -> list[Unfinished]:
    """The downloads kept for the next install, newest first; a note whose partial file is gone is forgotten."""
    folder = models_dir / DOWNLOADS
    found: list[tuple[float, Unfinished]] = []
    for note in folder.glob("*.json") if folder.is_dir() else ():
        try:
            said = json.loads(note.read_text(encoding="utf-8"))
            reference, size = str(said["reference"]), int(said["size"])
            shas = [str(sha) for sha in said.get("parts", [note.stem])]
            if not all(_SHA256.fullmatch(sha) for sha in shas):
                raise ValueError("not a list of SHA-256s")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # a note Hearth did not write: left alone, and not offered
        kept = [partial.stat() for sha in shas if (partial := folder / f"{sha}.partial").is_file()]
        if not kept:
            note.unlink(missing_ok=True)
            continue
        newest = max(stat.st_mtime for stat in kept)
        found.append((newest, Unfinished(reference, sum(stat.st_size for stat in kept), size)))
    return [item for _, item in sorted(found, key=lambda pair: -pair[0])]


MAX_RESULTS = 50


def search_hub(text: str, limit: int = 10) -> list[HubListing]:
    """The hub's GGUF repositories matching ``text`` (most downloaded first), with their files and sizes."""
    wanted = text.strip()
    if not wanted:
        raise HubNameInvalid("Nothing to search for.", "Give a few letters of the model's name, for example qwen.")
    _refuse_if_the_person_keeps_it_offline()
    return search(wanted, max(1, min(limit, MAX_RESULTS)))


def _refuse_if_the_person_keeps_it_offline() -> None:
    if person_keeps_hub_offline():
        raise HubUnreachable(
            "HF_HUB_OFFLINE is set, so nothing is fetched from the Hugging Face Hub.",
            "Unset HF_HUB_OFFLINE to install from the hub or search it.",
        )


def install_from_hub(
    store: ModelStore, reference: str, cancel: CancelToken
) -> Iterator[InstallProgress | HubPicked | HubInstalled]:
    """Yields progress, then :class:`HubInstalled`; raises the typed error (a bad name, the hub unreachable or
    refusing, a full disk, a cancel, bytes that do not match) with nothing registered."""
    hub_file = parse_reference(reference)
    _refuse_if_the_person_keeps_it_offline()
    yield InstallProgress("download", 0.0, f"Asking the hub about {hub_file.reference}…")
    files = listing(hub_file)  # asked once: the pick and the file's facts both come from it
    if not hub_file.filename:  # a repository named alone: the file that suits this computer
        hub_file, why = pick_file(hub_file, gguf_files(files), available_memory(), RUNTIME_OVERHEAD)
        yield HubPicked(hub_file, why)
    parts = part_files(hub_file)  # one file, or each part of a split model
    facts = [facts_of(part, files) for part in parts]
    known = store.by_sha256(facts[0].sha256)
    if known is not None and known.path.exists():
        yield HubInstalled(known, hub_file, already=True)
        return
    if known is not None:  # registered, but its file was deleted: forget the stale entry
        store.remove(known.id)
    partials = [partial_file(store.models_dir, fact.sha256) for fact in facts]
    check_space(list(zip(facts, partials, strict=True)))
    note = _note_of(partials[0])
    partials[0].parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    total = sum(fact.size for fact in facts)
    kept = {"reference": hub_file.reference, "size": total, "parts": [fact.sha256 for fact in facts]}
    note.write_text(json.dumps(kept), encoding="utf-8")
    try:
        done = 0
        for number, (part, fact, partial) in enumerate(zip(parts, facts, partials, strict=True), start=1):
            for step in fetch(part, fact, partial, cancel, asked=hub_file.reference):
                if len(parts) == 1:
                    yield step
                else:
                    share = (done + step.fraction * fact.size) / total
                    yield InstallProgress(step.stage, share, f"Part {number} of {len(parts)}: {step.message}")
            done += fact.size
    finally:
        if not any(partial.exists() for partial in partials):  # refused, and removed: nothing to go on from
            note.unlink(missing_ok=True)
    placed = _placed(store.models_dir, parts, partials, facts[0].sha256)
    note.unlink(missing_ok=True)
    yield InstallProgress("register", 1.0, f"Checking {placed[0].name}…")
    try:
        stored, _info = store.add(placed[0], source="installed", sha256=facts[0].sha256)
    except HearthError:
        for file in placed:  # not a model Hearth can use: nothing stays behind
            file.unlink(missing_ok=True)
        if len(placed) > 1:
            placed[0].parent.rmdir()
        raise
    yield HubInstalled(stored, hub_file)


def _placed(models_dir: Path, parts: list[HubFile], partials: list[Path], sha256: str) -> list[Path]:
    """The downloaded files moved into the models folder: a single file by its own name; the parts of a split model
    into a folder of their own, each by the name it was published with (llama.cpp opens the others by those names
    from the first)."""
    if len(parts) == 1:
        target = free_file(models_dir, Path(parts[0].filename).name, sha256)
        partials[0].replace(target)
        return [target]
    folder = free_folder(models_dir, Path(parts[0].filename).name, sha256)
    folder.mkdir(mode=0o700)
    placed = []
    for part, partial in zip(parts, partials, strict=True):
        target = folder / Path(part.filename).name
        partial.replace(target)
        placed.append(target)
    return placed
