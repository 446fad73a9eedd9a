"""The models Hearth knows: the embedded one, files imported from disk, and files Hearth made (quantized or
converted), with the default model. SQLite in the data directory; one transaction per change.

Models are identified by SHA-256 (the first 12 hex digits are enough to name one on the command line). Imported
files stay where they are unless the user asks for a copy; files under Hearth's own models folder are Hearth's,
and removing such a model deletes its file. The embedded model is always listed and cannot be removed.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from models.facts import FACTS_VERSION, Refusal, decode_facts, encode_facts
from models.gguf import ModelInfo, model_files, read_model_info, sha256_of
from models.gguf_reader import ModelFileUnreadable
from models.gguf_split import without_split
from models.shared.database import Database
from models.shared.errors import HearthError, ModelFileError, StorageError, shown

Source = Literal["embedded", "imported", "installed", "quantized", "converted"]
SCHEMA_VERSION = 1
SHORT_ID = 12

_SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    sha256 TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    source TEXT NOT NULL,
    parent TEXT,
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS preferences (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS model_facts (
    sha256 TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    facts_version INTEGER NOT NULL,
    facts TEXT NOT NULL
);
"""


class ModelNotKnown(HearthError):
    """No model matches what the user typed, or it cannot be changed that way."""


@dataclass(frozen=True)
class StoredModel:
    sha256: str
    path: Path
    source: Source
    parent: str | None  # the model this one was made from
    added_at: float

    @property
    def id(self) -> str:
        return self.sha256[:SHORT_ID]


def free_file(models_dir: Path, name: str, sha256: str) -> Path:
    """Where a model file called ``name`` goes in the models folder: its own name, or with the first digits of its
    SHA-256 added when another file has that name."""
    target = models_dir / name
    return target if not target.exists() else models_dir / f"{Path(name).stem}-{sha256[:8]}{Path(name).suffix}"


def free_folder(models_dir: Path, first_part: str, sha256: str) -> Path:
    """The folder of its own a split model whose first part is called ``first_part`` goes in (not made here): named
    without the part numbers, with the first digits of its SHA-256 added when that name is taken."""
    stem = without_split(first_part).removesuffix(".gguf")
    folder = models_dir / stem
    return folder if not folder.exists() else models_dir / f"{stem}-{sha256[:8]}"


class ModelStore:
    def __init__(self, db_path: Path, models_dir: Path, embedded: Path | None) -> None:
        self._database = Database(
            db_path,
            _SCHEMA,
            SCHEMA_VERSION,
            "model catalog",
            "to forget imported models",
            meanwhile="Until then, chat starts with the embedded model (or the file given with --model).",
        )
        self.models_dir = models_dir
        self._embedded = embedded
        self._embedded_sha: str | None = None

    # --- reading -------------------------------------------------------------------------------------------

    def embedded(self) -> StoredModel | None:
        if self._embedded is None or not self._embedded.exists():
            return None
        if self._embedded_sha is None:
            cached = self._preference(f"sha256:{self._embedded}")
            self._embedded_sha = cached or sha256_of(self._embedded)
            if cached is None:
                self._set_preference(f"sha256:{self._embedded}", self._embedded_sha)
        return StoredModel(self._embedded_sha, self._embedded, "embedded", None, 0.0)

    def all(self) -> list[StoredModel]:
        rows = self._database.rows("SELECT sha256, path, source, parent, added_at FROM models ORDER BY added_at")
        stored = [StoredModel(r[0], Path(r[1]), r[2], r[3], r[4]) for r in rows]
        embedded = self.embedded()
        return [embedded, *stored] if embedded else stored

    def by_sha256(self, sha256: str) -> StoredModel | None:
        return next((m for m in self.all() if m.sha256 == sha256), None)

    def find(self, reference: str) -> StoredModel:
        """A model by id (a prefix of its SHA-256, at least 4 characters), file name or path."""
        wanted = reference.strip()
        models = self.all()
        matches = [m for m in models if len(wanted) >= 4 and m.sha256.startswith(wanted.lower())]
        matches = matches or [m for m in models if wanted in (m.path.name, str(m.path), m.path.stem)]
        matches = matches or [m for m in models if wanted and m.path.name.lower().startswith(wanted.lower())]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise ModelNotKnown(
                f"No model matches {shown(reference)}.",
                "Run `hearth models list` and use an id from the first column.",
                page_remedy="Pick one in the Model list of the Models tab (it may have been removed).",
            )
        raise ModelNotKnown(
            f"{shown(reference)} matches {len(matches)} models.",
            "Use more characters of the id from `hearth models list`.",
            page_remedy="Pick one in the Model list of the Models tab.",
        )

    def default(self) -> StoredModel | None:
        """The model chosen as default, if it is still known and its file still exists."""
        sha = self._preference("default")
        if sha is None:
            return None
        match = next((m for m in self.all() if m.sha256 == sha), None)
        return match if match and match.path.exists() else None

    # --- changes -------------------------------------------------------------------------------------------

    def add(
        self,
        path: Path,
        source: Source = "imported",
        copy: bool = False,
        parent: str | None = None,
        sha256: str | None = None,
    ) -> tuple[StoredModel, ModelInfo]:
        """Validate ``path`` as a GGUF (Hearth's own checks, before llama.cpp ever reads it) and register it.
        ``sha256``: the file's, when the caller has just computed it while writing the file (saves a full read)."""
        info = read_model_info(path)
        sha = sha256 or sha256_of(path)
        known = next((m for m in self.all() if m.sha256 == sha), None)
        if known is not None:
            raise ModelNotKnown(
                f"{path.name} is already known as {known.id} ({known.path}).",
                f"Use it as it is: hearth models default {known.id}",
                page_remedy="It is already in the Model list: pick it there and press Use for chat.",
            )
        target = path.resolve()
        if copy:
            self.models_dir.mkdir(parents=True, exist_ok=True)
            target = self._copied(path, sha, info.parts)
        model = StoredModel(sha, target, source, parent, time.time())
        with self._database.transaction() as db:
            db.execute(
                "INSERT INTO models (sha256, path, source, parent, added_at) VALUES (?,?,?,?,?)",
                (model.sha256, str(model.path), model.source, model.parent, model.added_at),
            )
        self._keep_facts(sha, target, info)
        return model, info

    def _copied(self, path: Path, sha: str, parts: int) -> Path:
        """``path`` copied into the models folder under a free name; a split model's parts into a folder of their
        own, each under its own name (llama.cpp opens the others by their names from the first)."""
        if parts > 1:
            folder = free_folder(self.models_dir, path.name, sha)
            folder.mkdir(mode=0o700)
            for file in model_files(path):
                _copy_whole(file, folder / file.name)
            return folder / path.name
        target = free_file(self.models_dir, path.name, sha)
        _copy_whole(path, target)
        return target

    def remove(self, reference: str) -> StoredModel:
        model = self.find(reference)
        if model.source == "embedded":
            raise ModelNotKnown(
                "The embedded model ships with Hearth and cannot be removed.", "Choose another default instead."
            )
        # Only Hearth's own files are deleted. The parts go with the first only when its facts (read before they
        # are forgotten below) say it is split: a file merely named like a first part must not take others along.
        owned = self.owns(model.path)
        files = (model_files(model.path) if self._parts(model.path) > 1 else [model.path]) if owned else []
        with self._database.transaction() as db:
            db.execute("DELETE FROM models WHERE sha256 = ?", (model.sha256,))
            db.execute("DELETE FROM model_facts WHERE sha256 = ?", (model.sha256,))
            db.execute("DELETE FROM preferences WHERE key = 'default' AND value = ?", (model.sha256,))
        if owned:
            for file in files:
                file.unlink(missing_ok=True)
            folder = model.path.parent
            if len(files) > 1 and folder.resolve() != self.models_dir.resolve():
                with contextlib.suppress(OSError):  # the split model's own folder, once empty
                    folder.rmdir()
        return model

    def set_default(self, reference: str) -> StoredModel:
        model = self.find(reference)
        if not model.path.exists():
            raise ModelNotKnown(
                f"{model.path} is gone from disk.",
                f"Import it again, or remove it: hearth models remove {model.id}",
                page_remedy="Import it again (Import a GGUF file), or pick it in the Model list and press Remove.",
            )
        self._set_preference("default", model.sha256)
        return model

    def _parts(self, path: Path) -> int:
        """How many files the model at ``path`` is, as its facts say (1 for a file that is gone or refused)."""
        try:
            return self.model_info(path).parts
        except (ModelFileError, OSError):
            return 1

    def owns(self, path: Path) -> bool:
        """Files under Hearth's models folder are Hearth's (made or copied by it)."""
        return path.resolve().is_relative_to(self.models_dir.resolve())

    def close(self) -> None:
        self._database.close()

    # --- facts of each file, kept so that listing does not parse every file again --------------------------------

    def model_info(self, path: Path) -> ModelInfo:
        """The facts of the model file at ``path``: kept ones while the file's size and modification time are
        those seen last; else those of its content (SHA-256) if seen before; else read from the file and kept.
        Raises the file's refusal (kept too) like :func:`read_model_info` does."""
        try:
            seen = path.stat()
        except OSError:
            return read_model_info(path)  # the reader's typed error says what is wrong with the path
        stamp = (str(path), seen.st_size, seen.st_mtime_ns)
        rows = self._database.rows(
            "SELECT facts FROM model_facts WHERE path = ? AND size_bytes = ? AND mtime_ns = ? AND facts_version = ?",
            (*stamp, FACTS_VERSION),
        )
        if rows and (kept := decode_facts(rows[0][0], path)) is not None:
            return _as_info(kept)
        try:
            sha = sha256_of(path)
        except OSError:
            return read_model_info(path)
        rows = self._database.rows(
            "SELECT facts FROM model_facts WHERE sha256 = ? AND facts_version = ?", (sha, FACTS_VERSION)
        )
        facts = decode_facts(rows[0][0], path) if rows else None
        if facts is None:
            try:
                facts = read_model_info(path)
            except ModelFileUnreadable:
                raise  # about the path, not the content: not kept
            except ModelFileError as exc:
                facts = Refusal(exc.message, exc.remedy)
        self._keep_facts(sha, path, facts, seen.st_size, seen.st_mtime_ns)
        return _as_info(facts)

    def sha256_for(self, path: Path) -> str:
        """The SHA-256 of the model file at ``path``, computed once per version of the file (size and time)."""
        self.model_info(path)
        seen = path.stat()
        rows = self._database.rows(
            "SELECT sha256 FROM model_facts WHERE path = ? AND size_bytes = ? AND mtime_ns = ?",
            (str(path), seen.st_size, seen.st_mtime_ns),
        )
        return str(rows[0][0]) if rows else sha256_of(path)

    def _keep_facts(
        self, sha: str, path: Path, facts: ModelInfo | Refusal, size: int | None = None, mtime_ns: int | None = None
    ) -> None:
        try:
            if size is None or mtime_ns is None:
                seen = path.stat()
                size, mtime_ns = seen.st_size, seen.st_mtime_ns
            with self._database.transaction() as db:
                db.execute(
                    "INSERT OR REPLACE INTO model_facts (sha256, path, size_bytes, mtime_ns, facts_version, facts) "
                    "VALUES (?,?,?,?,?,?)",
                    (sha, str(path), size, mtime_ns, FACTS_VERSION, encode_facts(facts)),
                )
        except (OSError, StorageError):  # a file gone or a catalog that cannot be written: read again next time
            return

    def _preference(self, key: str) -> str | None:
        rows = self._database.rows("SELECT value FROM preferences WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def _set_preference(self, key: str, value: str) -> None:
        with self._database.transaction() as db:
            db.execute("INSERT OR REPLACE INTO preferences (key, value) VALUES (?, ?)", (key, value))


def _copy_whole(source: Path, target: Path) -> None:
    """A copy that is only ever seen whole under ``target``'s name."""
    partial = target.with_name(f".{target.name}.partial")
    shutil.copyfile(source, partial)
    partial.replace(target)


def _as_info(facts: ModelInfo | Refusal) -> ModelInfo:
    if isinstance(facts, Refusal):
        raise ModelFileError(facts.message, facts.remedy)
    return facts
