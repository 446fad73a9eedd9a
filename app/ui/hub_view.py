"""Pure functions for the Models tab's Hugging Face Hub section: the curated models and a search's files as one table
with what each needs here, the Install picker's choices, and the line about downloads an earlier install left."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from app.services.catalog.hub_installs import Unfinished
from backends.memory import format_bytes
from models.catalog import rough_fit
from models.hub import HubListing, parse_reference, quantization_of
from models.hub_catalog import HubModel

HUB_HEADERS = ["Model", "File", "Size", "Type", "License", "Fits here", "Installed"]
HUB_COLUMN_WIDTHS: list[str | int] = ["18%", "25%", "8%", "10%", "11%", "17%", "11%"]


@dataclass(frozen=True)
class HubRow:
    """One installable file: ``choice`` is what Install is given (a curated key, or ``hf:REPO/FILE``)."""

    choice: str
    model: str
    file: str
    size: int
    license: str = ""  # known for the curated models; a search shows the repository's own page for it

    @property
    def file_name(self) -> str:
        return PurePosixPath(self.file).name


def curated_rows(entries: Iterable[HubModel]) -> list[HubRow]:
    return [HubRow(e.key, e.title, e.file_name, e.size_bytes, e.license) for e in entries]


def search_rows(listings: Iterable[HubListing]) -> list[HubRow]:
    """Every file the search found, repository by repository (each repository's files smallest first)."""
    return [HubRow(f"hf:{item.repo}/{name}", item.repo, name, size) for item in listings for name, size in item.files]


def unfinished_row(unfinished: Unfinished) -> HubRow:
    """A download left from before that the shown list lacks (it came from a search before a restart)."""
    hub_file = parse_reference(unfinished.reference)
    return HubRow(unfinished.reference, hub_file.repo, hub_file.filename, unfinished.size)


def hub_table(rows: Sequence[HubRow], installed: Mapping[str, str], ram_available_bytes: int) -> list[list[Any]]:
    """``installed`` maps an installed model's file name to its id in the catalog."""
    return [
        [
            row.model,
            row.file,
            format_bytes(row.size),
            quantization_of(row.file) or "-",
            row.license or "see its page on the hub",
            rough_fit(row.size, ram_available_bytes),
            "yes" if row.file_name in installed else "no",
        ]
        for row in rows
    ]


def hub_choices(rows: Sequence[HubRow]) -> list[tuple[str, str]]:
    return [(f"{row.model} — {row.file_name}, {format_bytes(row.size)}", row.choice) for row in rows]


def unfinished_line(unfinished: Sequence[Unfinished]) -> str:
    """What the section says when it opens with downloads left from before (the newest is picked for Install)."""
    if not unfinished:
        return ""
    newest = unfinished[0]
    name = parse_reference(newest.reference).filename or newest.reference
    share = 100 * newest.have // max(1, newest.size)
    said = (
        f"The download of {name} stopped at {format_bytes(newest.have)} of {format_bytes(newest.size)} ({share}%): "
        "press Install to go on from there."
    )
    others = len(unfinished) - 1
    return said + (f" {others} more unfinished download{'s' if others > 1 else ''} kept." if others else "")
