"""Pure functions for the Models tab: the catalog as a table, the pickers, the installable models, the ladder as a
table, and the page's words for what the services report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.services.catalog.models import ModelRow
from backends.memory import format_bytes
from backends.tool_calls import template_family
from models.catalog import PackagedModel, packaged, rough_fit
from models.gguf import ModelInfo
from models.ladder import LADDER_FOLDER, Rung, copy_label, spread_of
from models.quantize import size_note
from models.shared.errors import HearthError

# "Fits here" comes early, so it is on screen without scrolling at common widths; the full SHA-256 is in
# `hearth models list --json` (the id is its first 12 digits).
MODEL_HEADERS = ["In use", "Name", "Fits here", "Size", "Params", "Context", "Chat", "License"]
MODEL_COLUMN_WIDTHS: list[str | int] = ["8%", "27%", "27%", "8%", "8%", "8%", "6%", "8%"]
LADDER_HEADERS = ["Type", "Size", "Load s", "Memory", "Prefill tok/s", "Decode tok/s", "Perplexity"]
INSTALL_HEADERS = ["Name", "Size", "License", "Fits here", "Installed"]
INSTALL_COLUMN_WIDTHS: list[str | int] = ["32%", "9%", "16%", "27%", "16%"]
FIT_WORDS = {"green": "yes", "amber": "tight", "red": "no"}
CANNOT_RUN = "cannot run here"


def model_name(row: ModelRow) -> str:
    """The model and its type (``SmolLM2-135M-Instruct Q8_0``), so copies of one model tell apart; the ladder's
    copies say so."""
    if row.info is None:
        return row.stored.path.name
    known = packaged(row.stored.sha256)
    if known is not None:  # a packaged model: the name the install list and the first-run note give it
        return known.title
    name = copy_label(row.info.name, row.info.quantization)
    if row.stored.source in ("quantized", "converted") and row.stored.path.parent.name == LADDER_FOLDER:
        return f"{name} · ladder copy"
    return name


def name_cell(row: ModelRow) -> str:
    """The name with the id the command line takes (``hearth models default ID``)."""
    return f"{model_name(row)} · id {row.stored.id}"


def model_table(rows: Sequence[ModelRow], in_use: Path | None = None) -> list[list[Any]]:
    """``in_use``: the file chat uses now; the model Hearth starts with (``is_default``), if another, says so."""
    table: list[list[Any]] = []
    for row in rows:
        using = in_use is not None and row.stored.path == in_use
        mark = "in use" if using else ("next start" if row.is_default else "")
        info = row.info
        if info is None:
            table.append([mark, name_cell(row), f"no: {row.problem}", "", "", "", "", ""])
            continue
        table.append(
            [
                mark,
                name_cell(row),
                f"{CANNOT_RUN if not row.fit.runnable else FIT_WORDS[row.fit.level]}: {row.fit.summary}",
                format_bytes(info.file_size_bytes),
                f"{info.parameter_count / 1e6:.0f}M",
                info.trained_context_length,
                chat_cell(info.chat_template),
                license_of(row),
            ]
        )
    return table


def license_of(row: ModelRow) -> str:
    """The model's licence: from its file, else from the package it came in."""
    if row.info is not None and row.info.license:
        return row.info.license
    known = packaged(row.stored.sha256)
    return known.license if known is not None else ""


def chat_cell(template: str | None) -> str:
    """Whether the model has a chat template, and whether that template lists tools itself."""
    if not template:
        return "no"
    return "yes, and tools" if template_family(template) == "native" else "yes"


def in_use_line(model_name: str | None, why: str) -> str:
    """Which model chat uses, and which rule picked it."""
    if model_name is None:
        return "No model is loaded yet."
    return f"Chat uses **{model_name}** — {why}. Pick another below and press Use for chat to choose yourself."


def model_choices(rows: Sequence[ModelRow]) -> list[tuple[str, str]]:
    return [(f"{model_name(row)} — {row.stored.id}", row.stored.id) for row in rows]


def install_table(
    models: Sequence[PackagedModel],
    installed: dict[str, str],
    fits: dict[str, str],
    ram_available_bytes: int,
) -> list[list[Any]]:
    """The packaged models: ``installed`` maps a key to its id in the catalog; ``fits`` maps an installed key to
    its fit words from the real check (others get a rough one from their size)."""
    return [
        [
            model.title,
            format_bytes(model.size_bytes),
            model.license,
            fits.get(model.key) or rough_fit(model.size_bytes, ram_available_bytes),
            "yes" if model.key in installed else "no",
        ]
        for model in models
    ]


def install_choices(models: Sequence[PackagedModel]) -> list[tuple[str, str]]:
    return [(f"{model.title} — {format_bytes(model.size_bytes)}", model.key) for model in models]


def page_message(exc: HearthError) -> str:
    """An error as the page says it: its remedy in terms of the page's controls where the service's speaks of the
    command line's."""
    return exc.for_page


def quantize_note(info: ModelInfo | None, qtype: str) -> str:
    """What a Quantize press would make, said before it runs."""
    if info is None:
        return "Pick a model to see the size of its copy."
    return size_note(info, qtype)


def ladder_table(rungs: Sequence[Rung]) -> list[list[Any]]:
    """Speeds as the median of the runs with their range, e.g. ``88.1 (80.2–90.0)``."""
    table: list[list[Any]] = []
    for r in rungs:
        prefill = spread_of(r.prefill_runs) if r.prefill_runs else spread_of([r.prefill_tokens_per_s])
        decode = spread_of(r.decode_runs) if r.decode_runs else spread_of([r.decode_tokens_per_s])
        table.append(
            [
                r.qtype,
                format_bytes(r.file_bytes),
                round(r.load_s, 2),
                format_bytes(r.resident_bytes),
                prefill.text(0) + (" ⚠ noisy" if prefill.noisy else ""),
                decode.text(1) + (" ⚠ noisy" if decode.noisy else ""),
                round(r.perplexity, 2),
            ]
        )
    return table
