"""Which model ids name what. Pure.

- The loaded chat model is listed under its file's stem (``SmolLM2-135M-Instruct.Q4_1`` for the embedded model):
  readable, and stable for as long as the same file is loaded. Requests may also name it by its file name, by its
  catalog id (the first 12 hex digits of its SHA-256, as ``hearth models list`` shows), or as ``hearth``, which
  always means "whatever chat model is loaded" (for tools configured once). Matching ignores case.
- ``hearth:COLLECTION`` answers from that collection with the loaded model, citing its passages.
- ``MODEL+ADAPTER`` (any chat model id above, ``hearth+ADAPTER`` included) answers with the loaded model and the
  LoRA adapter ``ADAPTER`` trained for it; each such adapter is listed. Adapter names cannot hold ``+``.
- The embedding model is named as its embedder is (``all-MiniLM-L6-v2``), and serves ``/v1/embeddings`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.api.errors import RequestInvalid, UnknownModel
from models.shared.errors import shown as shown_value

ALIAS = "hearth"
ADAPTER_SEPARATOR = "+"
COLLECTION_PREFIX = "hearth:"
# The 404 message lists the valid ids; past this many it points at /v1/models instead of listing them all.
LISTED_IDS = 12


@dataclass(frozen=True)
class ChatModelIds:
    primary: str
    aliases: tuple[str, ...]

    def names(self, requested: str) -> bool:
        wanted = requested.strip().casefold()
        return any(wanted == name.casefold() for name in (self.primary, *self.aliases))


def chat_model_ids(path: Path, catalog_id: str | None) -> ChatModelIds:
    aliases = [ALIAS, path.name]
    if catalog_id:
        aliases.append(catalog_id)
    return ChatModelIds(path.stem, tuple(aliases))


def split_adapter(model_id: str) -> tuple[str, str | None]:
    """The chat model id and the adapter name of ``MODEL+ADAPTER``; a model id without ``+`` names no adapter."""
    base, separator, adapter = model_id.strip().rpartition(ADAPTER_SEPARATOR)
    if not separator:
        return model_id, None
    if not base.strip() or not adapter.strip():
        raise RequestInvalid(
            f"The model id {model_id!r} names no {'model' if not base.strip() else 'adapter'}.",
            "Write MODEL+ADAPTER, as GET /v1/models lists it (for example hearth+NAME).",
            param="model",
        )
    return base.strip(), adapter.strip()


def adapter_id(model_id: str, adapter: str) -> str:
    return f"{model_id}{ADAPTER_SEPARATOR}{adapter}"


def collection_id(name: str) -> str:
    return f"{COLLECTION_PREFIX}{name}"


def requested_collection(model_id: str, extension: str | None) -> str | None:
    """The collection a chat request asks for: ``hearth:NAME`` as the model, or the ``hearth.collection``
    extension field beside a chat model id. Both at once must agree."""
    named = model_id[len(COLLECTION_PREFIX) :] if model_id.casefold().startswith(COLLECTION_PREFIX) else None
    extra = extension if extension is not None and extension.strip() else None
    if named is not None and not named.strip():
        raise RequestInvalid(
            f"The model id {model_id!r} names no collection.",
            "Write the collection's name after the prefix, as GET /v1/models lists it: hearth:NAME.",
            param="model",
        )
    if named is not None and extra is not None and " ".join(named.split()) != " ".join(extra.split()):
        raise RequestInvalid(
            f"The model id names the collection {named!r} but hearth.collection names {extra!r}.",
            "Name the collection once: either as the model (hearth:NAME) or in hearth.collection.",
            param="hearth.collection",
        )
    return named if named is not None else extra


def unknown_model(requested: str, valid: Sequence[str], hint: str = "") -> UnknownModel:
    listed = ", ".join(valid[:LISTED_IDS]) if valid else "none (no model is loaded)"
    more = f" and {len(valid) - LISTED_IDS} more" if len(valid) > LISTED_IDS else ""
    return UnknownModel(
        f"There is no model {shown_value(requested)} here{hint}. Available: {listed}{more}.",
        "Use one of those ids (GET /v1/models lists them all).",
    )


def unknown_collection(requested: str, collections: Sequence[str]) -> UnknownModel:
    """A collection named in the ``hearth.collection`` field that does not exist."""
    listed = ", ".join(collections[:LISTED_IDS]) if collections else "none yet"
    more = f" and {len(collections) - LISTED_IDS} more" if len(collections) > LISTED_IDS else ""
    return UnknownModel(
        f"There is no collection {shown_value(requested)} here. Collections: {listed}{more}.",
        "Name one of those in hearth.collection (GET /v1/models lists them as hearth:NAME), or create it by adding "
        "documents: hearth ingest PATH --collection NAME.",
        param="hearth.collection",
    )
