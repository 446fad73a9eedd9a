"""The LoRA adapters Hearth has trained: one folder each under the data folder's ``adapters/``, holding the GGUF
adapter and ``adapter.json`` (base model, data, settings, before/after figures, date). A folder appears whole
or not at all (it is renamed into place), so a crash never leaves an adapter without its record."""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.errors import AdapterError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ADAPTER_FILE = "adapter.gguf"
RECORD_FILE = "adapter.json"
ATTACHED_FILE = "attached.json"  # the adapter attached to the model chat runs, beside the adapters' folders


@dataclass(frozen=True)
class Attachment:
    """An adapter attached to the running model: every answer from that model uses it, at ``scale``."""

    name: str
    scale: float
    base_path: str  # the model it was attached to; another model in use leaves it aside


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
        attached = self.attached()
        if attached is not None and attached.name == record.name:
            self.detach()
        shutil.rmtree(self.root / record.name)
        return record

    def attached(self) -> Attachment | None:
        try:
            raw = json.loads((self.root / ATTACHED_FILE).read_text(encoding="utf-8"))
            attachment = Attachment(str(raw["name"]), float(raw["scale"]), str(raw["base_path"]))
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return attachment if self.exists(attachment.name) else None

    def attach(self, attachment: Attachment) -> None:
        self.get(attachment.name)  # a name that is not an adapter is refused with the list
        self.root.mkdir(parents=True, exist_ok=True)
        partial = self.root / f".{ATTACHED_FILE}.partial"
        partial.write_text(json.dumps(asdict(attachment)), encoding="utf-8")
        partial.replace(self.root / ATTACHED_FILE)

    def detach(self) -> None:
        (self.root / ATTACHED_FILE).unlink(missing_ok=True)

    def _read(self, folder: Path) -> AdapterRecord | None:
        try:
            raw: dict[str, Any] = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
            raw["folder"] = str(folder)
            return AdapterRecord(**raw)
        except (OSError, ValueError, TypeError):
            return None  # not an adapter folder, or a damaged record: never offered
