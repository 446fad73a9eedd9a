"""The model catalog as the app uses it: open it, list models with their facts and fit, and pick the default."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.errors import HearthError, ModelFileError
from app.paths import DataPaths
from backends.hardware import HardwareInventory
from backends.selection import Preferences
from models.fit import FitVerdict, fit_verdict
from models.gguf import ModelInfo, read_model_info
from models.store import ModelStore, StoredModel


@dataclass(frozen=True)
class ModelRow:
    stored: StoredModel
    info: ModelInfo | None
    fit: FitVerdict
    is_default: bool
    problem: str = ""  # why the file can no longer be read, if so


def open_model_store(paths: DataPaths) -> ModelStore:
    from models.embedded import embedded_chat_model

    try:
        embedded: Path | None = embedded_chat_model()
    except ModelFileError:
        embedded = None
    return ModelStore(paths.models_db, paths.models_dir, embedded)


def default_model_path(paths: DataPaths) -> Path | None:
    """The default chosen with `hearth models default`, if any (else the caller uses the embedded model)."""
    if not paths.models_db.exists():
        return None
    store = open_model_store(paths)
    try:
        default = store.default()
        return default.path if default else None
    finally:
        store.close()


def model_rows(store: ModelStore, inventory: HardwareInventory, prefs: Preferences) -> list[ModelRow]:
    from backends import registry

    default = store.default()
    default_sha = default.sha256 if default else next((m.sha256 for m in store.all() if m.source == "embedded"), "")
    rows = []
    for stored in store.all():
        try:
            info = read_model_info(stored.path)
        except HearthError as exc:
            rows.append(
                ModelRow(stored, None, FitVerdict("red", exc.message), stored.sha256 == default_sha, exc.message)
            )
            continue
        verdict = fit_verdict(inventory, info, prefs, registry.AUTOMATIC, registry.ALL)
        rows.append(ModelRow(stored, info, verdict, stored.sha256 == default_sha))
    return rows
