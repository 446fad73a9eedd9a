"""``python -m rag.vector_probe FOLDER``: open a Chroma folder and read every collection, in a process of its own.

Chroma 1.5 crashes its whole process with SIGSEGV on some damaged vector-index files (a garbled data_level0.bin,
a segment truncated by a killed flush) instead of raising; here such a crash costs only this process, and the
caller (:func:`app.services.upkeep.store_health.check_vectors`) reports the store as damaged. Prints one JSON object:
``{"collections": {store name: chunks}}``, or ``{"damage": "what is wrong"}``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from models.shared.database import DamagedStore, first_problem
from rag.store import CHROMA_DB, VectorStore


def probe(directory: Path) -> dict[str, object]:
    database = directory / CHROMA_DB
    if database.exists():
        db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            problem = first_problem(db)
        except sqlite3.DatabaseError as exc:
            problem = str(exc)
        finally:
            db.close()
        if problem is not None:
            return {"damage": f"{CHROMA_DB}: {problem}"}
    try:
        store = VectorStore(directory)
        return {"collections": {name: store.exercise(name) for name in store.store_names()}}
    except DamagedStore as exc:
        return {"damage": exc.detail or exc.message}


def main() -> None:
    # Telemetry stays off: VectorStore opens Chroma with it disabled, and the caller's environment is inherited.
    print(json.dumps(probe(Path(sys.argv[1]))), flush=True)


if __name__ == "__main__":
    main()
