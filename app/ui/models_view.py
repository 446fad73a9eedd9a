"""Pure functions for the Models tab: the catalog as a table, the pickers, and the ladder as a table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.services.models import ModelRow
from backends.memory import format_bytes
from models.ladder import Rung

MODEL_HEADERS = [
    "",
    "Id",
    "Name",
    "Architecture",
    "Parameters",
    "Type",
    "Size",
    "Context",
    "Chat template",
    "License",
    "Fits here",
    "SHA-256",
]
LADDER_HEADERS = ["Type", "Size", "Load s", "Memory", "Prefill tok/s", "Decode tok/s", "Perplexity"]
FIT_WORDS = {"green": "yes", "amber": "tight", "red": "no"}
CANNOT_RUN = "cannot run here"


def model_table(rows: Sequence[ModelRow]) -> list[list[Any]]:
    table: list[list[Any]] = []
    for row in rows:
        mark = "default" if row.is_default else ""
        info = row.info
        if info is None:
            table.append(
                [mark, row.stored.id, row.stored.path.name, "", "", "", "", "", "", "", f"no: {row.problem}", ""]
            )
            continue
        table.append(
            [
                mark,
                row.stored.id,
                info.name,
                info.architecture,
                f"{info.parameter_count / 1e6:.0f}M",
                info.quantization,
                format_bytes(info.file_size_bytes),
                info.trained_context_length,
                "yes" if info.chat_template else "no",
                info.license or "",
                f"{CANNOT_RUN if not row.fit.runnable else FIT_WORDS[row.fit.level]}: {row.fit.summary}",
                row.stored.sha256,
            ]
        )
    return table


def model_choices(rows: Sequence[ModelRow]) -> list[tuple[str, str]]:
    return [
        (f"{row.info.display_name if row.info else row.stored.path.name} — {row.stored.id}", row.stored.id)
        for row in rows
    ]


def ladder_table(rungs: Sequence[Rung]) -> list[list[Any]]:
    return [
        [
            r.qtype,
            format_bytes(r.file_bytes),
            round(r.load_s, 2),
            format_bytes(r.resident_bytes),
            round(r.prefill_tokens_per_s),
            round(r.decode_tokens_per_s, 1),
            round(r.perplexity, 2),
        ]
        for r in rungs
    ]
