"""What the model ids of ``app.api.ids`` point at right now: the loaded model, the collections, the embedder.
Reads the runtime, the model catalog and the document manifest, so call it from a worker thread."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from app.api.ids import (
    COLLECTION_PREFIX,
    ChatModelIds,
    adapter_id,
    chat_model_ids,
    collection_id,
    split_adapter,
    unknown_collection,
    unknown_model,
)
from app.api.responses import ModelEntry
from app.services.container import Services
from app.services.library.documents import DocumentServices
from backends.base import AdapterUse
from models.shared.errors import AdapterError, HearthError
from rag.manifest import CollectionError, normalize_name

log = logging.getLogger(__name__)


class ModelDirectory:
    def __init__(self, services: Services) -> None:
        self._services = services
        self._catalog_ids: dict[Path, str | None] = {}
        self._lock = threading.Lock()

    def chat_ids(self) -> ChatModelIds | None:
        model = self._services.runtime.model
        return chat_model_ids(model.path, self._catalog_id(model.path)) if model is not None else None

    def documents(self) -> DocumentServices:
        return self._services.documents.get()

    def collection(self, name: str, requested: str) -> str:
        """The collection's name as stored, or :class:`UnknownModel` listing what there is."""
        try:
            info = self.documents().manifest.find(normalize_name(name))
        except CollectionError:
            info = None
        if info is None and not requested.casefold().startswith(COLLECTION_PREFIX):
            raise unknown_collection(name, [i.name for i in self.documents().manifest.collections()])
        if info is None:
            raise unknown_model(requested, self.valid_ids(), hint=" (there is no such collection)")
        return info.name

    def chat_model(self, requested: str) -> tuple[str, AdapterUse | None]:
        """The listed id ``requested`` names and the adapter it asks for: ``MODEL+ADAPTER`` names the loaded
        model with one of its adapters, anything else goes to :meth:`check_chat_model`."""
        if self._names_loaded_model(requested):
            return self.check_chat_model(requested), None
        base, adapter = split_adapter(requested)
        if adapter is None:
            return self.check_chat_model(requested), None
        model_id = self.check_chat_model(base)
        from app.services.training.tuning import adapter_for

        model = self._services.runtime.model
        if model is None:
            raise unknown_model(requested, self.valid_ids())
        try:
            record, use = adapter_for(self._services.paths, adapter, self._sha256(model.path))
        except AdapterError as exc:
            raise unknown_model(requested, self.valid_ids(), hint=f" ({exc.message.rstrip('.')})") from None
        return adapter_id(model_id, record.name), use

    def _names_loaded_model(self, requested: str) -> bool:
        ids = self.chat_ids()
        return ids is not None and ids.names(requested)

    def check_chat_model(self, requested: str) -> str:
        """The listed id of the loaded model if ``requested`` names it; otherwise :class:`UnknownModel`."""
        ids = self.chat_ids()
        if ids is not None and ids.names(requested):
            return ids.primary
        embedder = self._embedder_name()
        if embedder is not None and requested.strip().casefold() == embedder.casefold():
            raise unknown_model(
                requested, self.valid_ids(), hint=" for chat (it is the embedding model; send it to /v1/embeddings)"
            )
        raise unknown_model(requested, self.valid_ids())

    def check_embedder(self, requested: str) -> str:
        name = self.documents().embedder.name
        if requested.strip().casefold() != name.casefold():
            raise unknown_model(requested, [name], hint=" for embeddings")
        return name

    def valid_ids(self) -> list[str]:
        return [entry.id for entry in self.entries()]

    def entry(self, requested: str) -> ModelEntry:
        """The listed entry ``requested`` names (an alias names the chat model's entry)."""
        entries = self.entries()
        wanted = requested.strip().casefold()
        for entry in entries:
            names = [entry.id, *entry.details.get("aliases", [])]
            if any(wanted == name.casefold() for name in names):
                return entry
        raise unknown_model(requested, [e.id for e in entries])

    def entries(self) -> list[ModelEntry]:
        """The chat model (if loaded), a ``hearth:NAME`` per collection, and the embedder."""
        entries: list[ModelEntry] = []
        model = self._services.runtime.model
        ids = self.chat_ids()
        if model is not None and ids is not None:
            created = int(model.path.stat().st_mtime) if model.path.exists() else 0
            details = {
                "aliases": list(ids.aliases),
                "name": model.display_name,
                "architecture": model.architecture,
                "quantization": model.quantization,
            }
            entries.append(ModelEntry(ids.primary, "chat", created, details))
            entries.extend(self._adapter_entries(ids.primary, model.path))
        try:
            documents = self.documents()
            for info in documents.manifest.collections():
                entries.append(ModelEntry(collection_id(info.name), "collection", int(info.created_at)))
            entries.append(ModelEntry(documents.embedder.name, "embedding", 0))
        except HearthError as exc:
            log.warning("collections are not available to the API: %s %s", exc.message, exc.remedy)
        return entries

    def _adapter_entries(self, model_id: str, path: Path) -> list[ModelEntry]:
        """One entry per adapter trained for the loaded model."""
        from app.services.training.tuning import adapter_store

        try:
            sha = self._sha256(path)
            records = [r for r in adapter_store(self._services.paths).all() if r.base_sha256 == sha]
        except HearthError as exc:
            log.warning("adapters are not available to the API: %s", exc.message)
            return []
        return [
            ModelEntry(
                adapter_id(model_id, r.name),
                "adapter",
                int(r.created_at),
                {
                    "base": model_id,
                    "adapter": r.name,
                    "perplexity_before": r.perplexity_before,
                    "perplexity_after": r.perplexity_after,
                },
            )
            for r in records
        ]

    def _sha256(self, path: Path) -> str:
        """The loaded model's SHA-256, as the model store keeps it (computed once per version of the file)."""
        from app.services.catalog.models import open_model_store

        store = open_model_store(self._services.paths)
        try:
            return store.sha256_for(path)
        finally:
            store.close()

    def _embedder_name(self) -> str | None:
        try:
            return self.documents().embedder.name
        except HearthError:
            return None

    def _catalog_id(self, path: Path) -> str | None:
        """The model's short id in ``hearth models list``, if the catalog knows the file (looked up once)."""
        with self._lock:
            if path in self._catalog_ids:
                return self._catalog_ids[path]
        from app.services.catalog.models import open_model_store

        found: str | None = None
        try:
            store = open_model_store(self._services.paths)
            try:
                resolved = path.resolve()
                found = next((m.id for m in store.all() if m.path.resolve() == resolved), None)
            finally:
                store.close()
        except HearthError as exc:
            log.warning("the model catalog is not available to the API: %s", exc.message)
        with self._lock:
            self._catalog_ids[path] = found
        return found
