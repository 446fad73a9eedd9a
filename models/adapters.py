"""The LoRA adapters Hearth has trained: one folder each under the data folder's ``adapters/``, holding the GGUF
adapter and ``adapter.json`` (base model, data, settings, before/after figures, date). A folder appears whole
or not at all (it is renamed into place), so a crash never leaves an adapter without its record."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from models.shared.errors import AdapterError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ADAPTER_FILE = "adapter.gguf"
RECORD_FILE = "adapter.json"
ATTACHMENTS_FILE = "attachments.json"  # which adapter answers where, beside the adapters' folders
LEGACY_ATTACHED_FILE = "attached.json"  # before attachments had scopes: the one attached to the model
MODEL_SCOPE = "model"


@dataclass(frozen=True)
class Attachment:
    """An adapter attached to the running model, at ``scale``: for every answer (scope ``model``), for one
    conversation's (``conversation:ID``) or for answers from one collection (``collection:NAME``)."""

    name: str
    scale: float
    base_path: str  # the model it was attached to; another model in use leaves it aside
    scope: str = MODEL_SCOPE


def conversation_scope(conversation_id: str) -> str:
    return f"conversation:{conversation_id}"


def collection_scope(collection: str) -> str:
    return f"collection:{collection}"


def describe_scope(scope: str, titles: Mapping[str, str] | None = None) -> str:
    """A scope in words: "every answer", "the collection “manuals”", "the conversation “Reset the router”"
    (``titles`` maps conversation ids to their titles)."""
    kind, _, key = scope.partition(":")
    if kind == "collection":
        return f"the collection “{key}”"
    if kind == "conversation":
        title = (titles or {}).get(key)
        return f"the conversation “{title}”" if title else f"the conversation {key}"
    return "every answer"


def scopes_for(conversation_id: str | None, collection: str | None) -> tuple[str, ...]:
    """The scopes an answer looks in, the narrowest first: its conversation, its collection, then every answer."""
    scopes = [conversation_scope(conversation_id)] if conversation_id else []
    if collection:
        scopes.append(collection_scope(collection))
    return (*scopes, MODEL_SCOPE)


def choose_attachment(
    attachments: dict[str, Attachment], scopes: tuple[str, ...], model_path: str
) -> Attachment | None:
    """The attachment an answer from ``model_path`` uses: the narrowest scope's, if it was made for that model
    (an adapter attached while another model ran is left aside, and a wider scope's applies)."""
    for scope in scopes:
        found = attachments.get(scope)
        if found is not None and Path(found.base_path) == Path(model_path):
            return found
    return None


@dataclass(frozen=True)
class AdapterRecord:
    name: str
    base_sha256: str
    base_name: str
    data_label: str
    settings: str  # the run's settings, in words
    steps: int
    held_out_before: float | None  # held-out loss (transformers, full precision); None without a held-out split
    held_out_after: float | None
    perplexity_before: float  # through llama.cpp on the quantized base, without and with the adapter
    perplexity_after: float
    checked_on_training_data: bool  # too few examples to hold any out
    created_at: float = field(default_factory=time.time)
    folder: str = ""

    @property
    def path(self) -> Path:
        return Path(self.folder) / ADAPTER_FILE

    def summary(self) -> str:
        where = "training" if self.checked_on_training_data else "held-out"
        return (
            f"perplexity on {where} examples {self.perplexity_before:.2f} -> {self.perplexity_after:.2f}, "
            f"{self.steps} steps on {self.data_label}"
        )


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise AdapterError(
            f"{name!r} cannot name an adapter.",
            "Use up to 64 letters, digits, dots, dashes or underscores, starting with a letter or digit.",
        )
    return name


class AdapterStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def all(self) -> list[AdapterRecord]:
        if not self.root.is_dir():
            return []
        records = [self._read(folder) for folder in sorted(self.root.iterdir()) if folder.is_dir()]
        return sorted((r for r in records if r is not None), key=lambda r: r.created_at)

    def exists(self, name: str) -> bool:
        return (self.root / name / RECORD_FILE).is_file()

    def get(self, name: str) -> AdapterRecord:
        record = self._read(self.root / check_name(name))
        if record is None:
            known = ", ".join(r.name for r in self.all()) or "none yet"
            raise AdapterError(
                f"There is no adapter named {name!r} (adapters: {known}).",
                "Train one in the Tuning tab (or with hearth tune).",
                page_remedy="Train one in the Tuning tab.",
            )
        return record

    def add(self, adapter_file: Path, record: AdapterRecord) -> AdapterRecord:
        """Copy ``adapter_file`` in under ``record.name`` (which must be free) with its record."""
        check_name(record.name)
        if self.exists(record.name):
            raise AdapterError(
                f"An adapter named {record.name!r} already exists.", "Pick another name, or remove that adapter first."
            )
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".{record.name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            shutil.copyfile(adapter_file, staging / ADAPTER_FILE)
            final = self.root / record.name
            kept = AdapterRecord(**{**asdict(record), "folder": str(final)})
            (staging / RECORD_FILE).write_text(json.dumps(asdict(kept), indent=1), encoding="utf-8")
            staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return kept

    def remove(self, name: str) -> AdapterRecord:
        record = self.get(name)
        kept = {scope: a for scope, a in self.attachments().items() if a.name != record.name}
        self._write_attachments(kept)
        shutil.rmtree(self.root / record.name)
        return record

    def attachments(self) -> dict[str, Attachment]:
        """Every attachment by scope (of adapters that still exist); a damaged file reads as none attached."""
        found: dict[str, Attachment] = {}
        try:
            raw = json.loads((self.root / LEGACY_ATTACHED_FILE).read_text(encoding="utf-8"))
            found[MODEL_SCOPE] = Attachment(str(raw["name"]), float(raw["scale"]), str(raw["base_path"]))
        except (OSError, ValueError, TypeError, KeyError):
            pass
        try:
            listed = json.loads((self.root / ATTACHMENTS_FILE).read_text(encoding="utf-8"))
            for item in listed:
                attachment = Attachment(
                    str(item["name"]), float(item["scale"]), str(item["base_path"]), str(item["scope"])
                )
                found[attachment.scope] = attachment
        except (OSError, ValueError, TypeError, KeyError):
            pass
        return {scope: a for scope, a in found.items() if self.exists(a.name)}

    def attached(self, scope: str = MODEL_SCOPE) -> Attachment | None:
        return self.attachments().get(scope)

    def attach(self, attachment: Attachment) -> None:
        self.get(attachment.name)  # a name that is not an adapter is refused with the list
        self._write_attachments({**self.attachments(), attachment.scope: attachment})

    def detach(self, scope: str = MODEL_SCOPE) -> Attachment | None:
        """Detach what is attached for ``scope``; returns it, or None when nothing was."""
        attachments = self.attachments()
        gone = attachments.pop(scope, None)
        self._write_attachments(attachments)
        return gone

    def _write_attachments(self, attachments: dict[str, Attachment]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        partial = self.root / f".{ATTACHMENTS_FILE}.partial"
        partial.write_text(json.dumps([asdict(a) for a in attachments.values()], indent=1), encoding="utf-8")
        partial.replace(self.root / ATTACHMENTS_FILE)
        (self.root / LEGACY_ATTACHED_FILE).unlink(missing_ok=True)  # now carried in the file above

    def _read(self, folder: Path) -> AdapterRecord | None:
        try:
            raw: dict[str, Any] = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
            raw["folder"] = str(folder)
            return AdapterRecord(**raw)
        except (OSError, ValueError, TypeError):
            return None  # not an adapter folder, or a damaged record: never offered
