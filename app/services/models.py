"""The model catalog as the app uses it: open it, list models with their facts and fit, and pick the default."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.database import DamagedStore
from app.errors import HearthError, ModelFileError
from app.paths import DataPaths
from backends.base import CancelToken
from backends.hardware import HardwareInventory
from backends.selection import Preferences
from models.fit import FitVerdict, cannot_run, fit_verdict
from models.gguf import ModelInfo, read_model_info
from models.gguf_reader import ModelFileUnreadable, NotAModelFile
from models.ladder import Rung
from models.store import ModelNotKnown, ModelStore, StoredModel

# The held-out text for perplexity: the Apache License 2.0, a real document anyone may copy verbatim.
HELDOUT_TEXT = Path(__file__).resolve().parents[2] / "models" / "data" / "heldout-apache-2.0.txt"


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
    except DamagedStore as exc:
        # Chat goes on with the embedded model rather than not at all; the Models tab and `hearth models` say why.
        logging.getLogger(__name__).warning("using the embedded model: %s %s", exc.message, exc.remedy)
        return None
    finally:
        store.close()
    return default.path if default else None


def model_rows(store: ModelStore, inventory: HardwareInventory, prefs: Preferences) -> list[ModelRow]:
    """Every known model with its facts (kept by the catalog, so files are not parsed again) and its fit here."""
    from backends import registry
    from backends.llamacpp_architectures import llamacpp_architectures

    architectures = llamacpp_architectures() if inventory.llama_cpp is not None else None
    default = store.default()
    default_sha = default.sha256 if default else next((m.sha256 for m in store.all() if m.source == "embedded"), "")
    rows = []
    for stored in store.all():
        try:
            info = store.model_info(stored.path)
        except HearthError as exc:
            rows.append(ModelRow(stored, None, cannot_run(exc.message), stored.sha256 == default_sha, exc.message))
            continue
        verdict = fit_verdict(inventory, info, prefs, registry.AUTOMATIC, registry.ALL, architectures)
        rows.append(ModelRow(stored, info, verdict, stored.sha256 == default_sha))
    return rows


class PathNotImportable(HearthError):
    """A path typed into the page is not a model file the page may import (deliberately not saying why)."""


def import_typed_path(store: ModelStore, typed: str) -> tuple[StoredModel, ModelInfo]:
    """Import the GGUF file at a path typed into the page, used where it is.

    The page can be used by anyone the user lets in, who need not be allowed to explore this computer's files, so
    its answers must not tell whether a path exists, is a folder, is readable or how big it is: only paths ending
    in .gguf are looked at, and every one that is not a readable GGUF file gets the same answer. A GGUF file that
    Hearth refuses still gets its reason (the file is a model either way). The command line, whose user has the
    files anyway, says exactly what is wrong (`hearth models import PATH`).
    """
    path = Path(typed.strip()).expanduser()
    if path.suffix.lower() == ".gguf":
        try:
            return store.add(path)
        except (ModelFileUnreadable, NotAModelFile):
            pass
    raise PathNotImportable(
        "Hearth cannot import that path: the page imports only readable GGUF model files, by a path ending in "
        ".gguf, and this path is not one.",
        "Check the path on the computer running Hearth, or drop the file into the box instead "
        "(`hearth models import PATH` in a terminal there says exactly what is wrong).",
    )


@dataclass(frozen=True)
class Made:
    """A model file Hearth just wrote and registered."""

    stored: StoredModel
    info: ModelInfo


def make_quantized(
    store: ModelStore, reference: str, qtype: str, threads: int, cancel: CancelToken, allow_requantize: bool = False
) -> Iterator[str | Made]:
    """Quantize a known model to ``qtype`` into Hearth's models folder and register it; yields progress lines,
    warnings (prefixed "warning: ") and finally :class:`Made`."""
    from models.quantize import check_request, output_name, quantize

    source = store.find(reference)
    info = read_model_info(source.path)
    for warning in check_request(info, qtype, allow_requantize):
        yield f"warning: {warning}"
    target = store.models_dir / output_name(info, qtype)
    for progress in quantize(info, target, qtype, threads, cancel, allow_requantize):
        yield progress.message
    stored, made = store.add(target, source="quantized", parent=source.sha256)
    yield Made(stored, made)


def make_full_precision(store: ModelStore, reference: str, to: str, cancel: CancelToken) -> Iterator[str | Made]:
    from models.convert import dequantize
    from models.quantize import output_name

    source = store.find(reference)
    target = store.models_dir / output_name(read_model_info(source.path), to)
    for _fraction, message in dequantize(source.path, target, to, cancel):
        yield message
    stored, made = store.add(target, source="converted", parent=source.sha256)
    yield Made(stored, made)


def run_ladder(
    store: ModelStore, reference: str, types: Sequence[str], threads: int, text: str, cancel: CancelToken
) -> Iterator[str | Rung]:
    """The ladder: the original file plus each type, quantized from a full-precision source (made once from a
    quantized original, and reused next time); yields progress lines and each measured :class:`Rung`."""
    from models.ladder import measure
    from models.quantize import FULL_PRECISION, TYPES, QuantizeError, output_name

    unknown = [t for t in types if t not in TYPES]
    if unknown:
        raise QuantizeError(f"Unknown types: {', '.join(unknown)}.", f"Use some of: {', '.join(TYPES)}.")
    original = store.find(reference)
    info = read_model_info(original.path)
    files: list[tuple[str, Path]] = [(f"{info.quantization} (original)", original.path)]
    source = info
    if info.quantization not in FULL_PRECISION:
        full = store.models_dir / output_name(info, "F16")
        if not full.exists():
            for step in make_full_precision(store, original.id, "F16", cancel):
                if isinstance(step, str):
                    yield step
        source = read_model_info(full)
    for qtype in types:
        target = store.models_dir / output_name(source, qtype)
        if not target.exists():
            from models.quantize import quantize

            for progress in quantize(source, target, qtype, threads, cancel):
                yield f"{qtype}: {progress.message}"
            with contextlib.suppress(ModelNotKnown):  # byte-identical to a model already known: keep that one
                store.add(target, source="quantized", parent=original.sha256)
        files.append((qtype, target))
    for index, (label, path) in enumerate(files):
        if cancel.cancelled:
            return
        yield f"Measuring {label} ({index + 1}/{len(files)})…"
        yield measure(path, label, text, threads)
