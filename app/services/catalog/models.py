"""The model catalog as the app uses it: open it, list models with their facts and fit, and pick the default."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.paths import DataPaths
from backends.base import CancelToken
from backends.hardware import HardwareInventory
from backends.plan import Preferences
from models.default import Candidate, StartPick, pick_start_model, rank_of
from models.fit import FitVerdict, cannot_run, fit_verdict
from models.gguf import ModelInfo, read_model_info
from models.gguf_reader import ModelFileUnreadable, NotAModelFile
from models.ladder import Rung
from models.quantize import QuantizeProgress, QuantizeWarning
from models.shared.database import DamagedStore
from models.shared.errors import HearthError, ModelFileError
from models.store import ModelNotKnown, ModelStore, Source, StoredModel

# The held-out text for perplexity: the Apache License 2.0, a real document anyone may copy verbatim.
HELDOUT_TEXT = Path(__file__).resolve().parents[3] / "models" / "data" / "heldout-apache-2.0.txt"


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
    """Every known model with its facts (kept by the catalog, so files are not parsed again) and its fit here;
    ``is_default`` marks the one Hearth starts with (the user's choice, else the best installed that fits)."""
    rows = _fitted_rows(store, inventory, prefs)
    pick = _pick(store, rows)
    return [dataclasses.replace(row, is_default=pick is not None and row.stored.path == pick.path) for row in rows]


def _fitted_rows(store: ModelStore, inventory: HardwareInventory, prefs: Preferences) -> list[ModelRow]:
    from backends import registry
    from backends.llamacpp.architectures import llamacpp_architectures

    architectures = llamacpp_architectures() if inventory.llama_cpp is not None else None
    rows = []
    for stored in store.all():
        try:
            info = store.model_info(stored.path)
        except HearthError as exc:
            rows.append(ModelRow(stored, None, cannot_run(exc.message), False, exc.message))
            continue
        verdict = fit_verdict(inventory, info, prefs, registry.AUTOMATIC, registry.ALL, architectures)
        rows.append(ModelRow(stored, info, verdict, False))
    return rows


def _pick(store: ModelStore, rows: Sequence[ModelRow], flag: Path | None = None) -> StartPick | None:
    chosen = store.default()
    candidates = [
        Candidate(
            row.stored.sha256,
            row.stored.path,
            bool(row.info and row.info.chat_template),
            row.info is not None and row.fit.runnable and row.fit.level == "green",
            embedded=row.stored.source == "embedded",
        )
        for row in rows
    ]
    return pick_start_model(candidates, chosen.path if chosen else None, flag)


def start_model(
    paths: DataPaths, inventory: HardwareInventory, prefs: Preferences, flag: Path | None = None
) -> StartPick | None:
    """The model Hearth starts with, and the rule that picked it: the file given with --model, else the user's
    choice, else the best installed chat model that fits here (:mod:`models.default`), else the embedded one.
    None when there is not even an embedded model (the caller says how to get one)."""
    if flag is not None:
        return pick_start_model([], flag=flag)
    if not paths.models_db.exists():  # a fresh data folder: nothing installed or chosen yet, and nothing to create
        from models.embedded import embedded_chat_model

        try:
            return StartPick(embedded_chat_model(), "best")
        except ModelFileError:
            return None
    store = open_model_store(paths)
    try:
        try:
            chosen = store.default()
        except DamagedStore as exc:
            # Chat goes on with the embedded model rather than not at all; the Models tab and `hearth models` say why.
            logging.getLogger(__name__).warning("using the embedded model: %s %s", exc.message, exc.remedy)
            embedded = store.embedded()
            return StartPick(embedded.path, "fallback") if embedded else None
        if chosen is not None:
            return StartPick(chosen.path, "choice")
        ranked = [m for m in store.all() if rank_of(m.sha256) is not None]
        if len(ranked) <= 1 and all(m.source == "embedded" for m in ranked):  # nothing to weigh: no fit checks
            embedded = store.embedded()
            return StartPick(embedded.path, "best") if embedded else None
        return _pick(store, _fitted_rows(store, inventory, prefs))
    finally:
        store.close()


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
        "Check the path on the computer running Hearth, or drop the file into the box beside it instead.",
    )


@dataclass(frozen=True)
class Made:
    """A model file Hearth just wrote and registered."""

    stored: StoredModel
    info: ModelInfo


MakeStep = QuantizeProgress | QuantizeWarning | Made


def make_quantized(
    store: ModelStore, reference: str, qtype: str, threads: int, cancel: CancelToken, allow_requantize: bool = False
) -> Iterator[MakeStep]:
    """Quantize a known model to ``qtype`` into Hearth's models folder and register it; yields the warnings first,
    then progress, and finally :class:`Made`."""
    from models.quantize import check_request, output_name, quantize

    source = store.find(reference)
    info = read_model_info(source.path)
    for warning in check_request(info, qtype, allow_requantize):
        yield QuantizeWarning(warning)
    target = store.models_dir / output_name(info, qtype)
    yield from quantize(info, target, qtype, threads, cancel, allow_requantize)
    stored, made = store.add(target, source="quantized", parent=source.sha256)
    yield Made(stored, made)


def make_full_precision(store: ModelStore, reference: str, to: str, cancel: CancelToken) -> Iterator[MakeStep]:
    from models.convert import dequantize
    from models.quantize import output_name

    source = store.find(reference)
    target = store.models_dir / output_name(read_model_info(source.path), to)
    for fraction, message in dequantize(source.path, target, to, cancel):
        yield QuantizeProgress(fraction, message)
    stored, made = store.add(target, source="converted", parent=source.sha256)
    yield Made(stored, made)


@dataclass(frozen=True)
class ModelsChanged:
    """The catalog changed (a ladder copy was added or removed): lists of models should be drawn again."""

    message: str


def run_ladder(
    store: ModelStore,
    reference: str,
    types: Sequence[str],
    threads: int,
    text: str,
    cancel: CancelToken,
    runs: int = 3,
    keep_copies: bool = True,
) -> Iterator[str | Rung | ModelsChanged]:
    """The ladder: the original file plus each type, quantized from a full-precision source (made once from a
    quantized original, and reused next time) into the ladder's own folder; yields progress lines, each measured
    :class:`Rung`, and :class:`ModelsChanged` as copies are registered (or removed after measuring, when the user
    chose not to keep them)."""
    from models.ladder import LADDER_FOLDER, copy_label, measure
    from models.quantize import FULL_PRECISION, TYPES, QuantizeError, output_name, quantize

    unknown = [t for t in types if t not in TYPES]
    if unknown:
        raise QuantizeError(f"Unknown types: {', '.join(unknown)}.", f"Use some of: {', '.join(TYPES)}.")
    original = store.find(reference)
    info = read_model_info(original.path)
    folder = store.models_dir / LADDER_FOLDER
    made: list[StoredModel] = []  # registered by this run: removed at the end unless kept
    files: list[tuple[str, Path]] = [(f"{info.quantization} (original)", original.path)]
    source = info
    try:
        if info.quantization not in FULL_PRECISION:
            full = folder / output_name(info, "F16")
            if not full.exists():
                yield f"Writing a full-precision (F16) source for the copies of {info.name}…"
                for _fraction, message in _dequantize(original.path, full, cancel):
                    yield message
                stored = _register(store, full, "converted", original.sha256)
                if stored is not None:
                    made.append(stored)
                    yield ModelsChanged(f"Added {copy_label(info.name, 'F16')} (the copies' source).")
            source = read_model_info(full)
        for qtype in types:
            if cancel.cancelled:
                return
            target = folder / output_name(source, qtype)
            if not target.exists():
                for progress in quantize(source, target, qtype, threads, cancel):
                    yield f"{copy_label(info.name, qtype)}: {progress.message}"
                stored = _register(store, target, "quantized", original.sha256)
                if stored is not None:
                    made.append(stored)
                    yield ModelsChanged(f"Added {copy_label(info.name, qtype)}.")
            files.append((qtype, target))
        for index, (label, path) in enumerate(files):
            if cancel.cancelled:
                return
            yield f"Measuring {label} ({index + 1}/{len(files)}, {runs} runs)…"
            yield measure(path, label, text, threads, runs=runs)
    finally:
        if not keep_copies:  # also when cancelled or failed: the user asked for no copies
            for stored in made:
                with contextlib.suppress(HearthError):
                    store.remove(stored.id)
    if not keep_copies and made:
        yield ModelsChanged(f"Removed the {len(made)} copies made for the ladder, as chosen.")


def _dequantize(source: Path, target: Path, cancel: CancelToken) -> Iterator[tuple[float, str]]:
    from models.convert import dequantize

    yield from dequantize(source, target, "F16", cancel)


def _register(store: ModelStore, path: Path, source: Source, parent: str) -> StoredModel | None:
    """Register a file the ladder made; None when it is byte-identical to a model already known (that one stays)."""
    try:
        return store.add(path, source=source, parent=parent)[0]
    except ModelNotKnown:
        return None
