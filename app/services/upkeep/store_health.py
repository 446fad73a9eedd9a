"""Whether each of Hearth's stores is sound: SQLite's check of every page for the databases, and for the vector
store Chroma opening every collection and searching it, in a separate process (a damaged vector index can crash
Chroma's process outright)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from models.shared.database import first_problem, is_damage

State = Literal["sound", "missing", "damaged", "unreadable"]
PROBE_TIMEOUT_S = 900


@dataclass(frozen=True)
class Health:
    state: State
    detail: str = ""
    collections: dict[str, int] = field(default_factory=dict)  # vector store: chunks per Chroma collection


def check_database(path: Path) -> Health:
    if not path.exists():
        return Health("missing")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            problem = first_problem(db)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        return Health("damaged" if is_damage(exc) else "unreadable", str(exc))
    return Health("damaged", problem) if problem else Health("sound")


def check_vectors(directory: Path, timeout_s: float = PROBE_TIMEOUT_S) -> Health:
    if not directory.exists():
        return Health("missing")
    try:
        probe = subprocess.run(
            [sys.executable, "-m", "rag.vector_probe", str(directory)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return Health("damaged", f"Chroma did not finish reading it within {timeout_s:.0f} s")
    if probe.returncode < 0:
        name = signal.Signals(-probe.returncode).name
        return Health("damaged", f"Chroma crashed ({name}) while reading it")
    try:
        answer = json.loads(probe.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return Health("unreadable", f"the check ended without an answer (exit code {probe.returncode})")
    if "damage" in answer:
        return Health("damaged", str(answer["damage"]))
    return Health("sound", collections={str(k): int(v) for k, v in answer["collections"].items()})
