"""A model file's facts as text, so the catalog keeps them instead of parsing the file on every listing.

Facts belong to a file's content (its SHA-256), not to its path: the display name, which comes from the file
name, is derived again for the path the file has now. A refusal (a file Hearth will not run, and why) is kept
the same way, so a hostile file costs its parse once, not on every `hearth models list`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.gguf import ModelInfo, model_name

# Facts written by another version of the reader are read from the file again (its checks may have changed).
FACTS_VERSION = 3  # 2: output_tied; 3: a split model read whole (parts)


@dataclass(frozen=True)
class Refusal:
    """Why Hearth refused a file's content (kept like facts; the file is not read again until it changes)."""

    message: str
    remedy: str


def encode_facts(facts: ModelInfo | Refusal) -> str:
    if isinstance(facts, Refusal):
        return json.dumps({"refusal": {"message": facts.message, "remedy": facts.remedy}})
    data = {field.name: getattr(facts, field.name) for field in dataclasses.fields(facts)}
    del data["path"], data["name"]
    data["tensor_types"] = sorted(facts.tensor_types)
    return json.dumps({"info": data})


def decode_facts(text: str, path: Path) -> ModelInfo | Refusal | None:
    """The facts ``encode_facts`` wrote, for the file now at ``path``; None if the text is not such facts."""
    try:
        data: dict[str, Any] = json.loads(text)
        if "refusal" in data:
            return Refusal(str(data["refusal"]["message"]), str(data["refusal"]["remedy"]))
        info = dict(data["info"])
        info["layer_bytes"] = tuple(int(n) for n in info["layer_bytes"])
        info["tensor_types"] = frozenset(str(t) for t in info["tensor_types"])
        name = model_name(path, int(info["file_size_bytes"]), str(info["quantization"]))
        return ModelInfo(path=path, name=name, **info)
    except (ValueError, TypeError, KeyError):
        return None
