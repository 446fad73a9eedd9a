"""The composition root: the one place where effects (probing, the database, backends) are wired together."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.paths import DataPaths, ensure_data_dir, resolve_data_paths
from app.services.answering.chat import ChatService
from app.services.library.conversations import ConversationStore
from app.services.library.cpu_share import CpuSharing
from app.services.library.documents import LazyDocuments, build_documents
from app.services.serving.control import ModelControl, StartChoice
from app.services.serving.model_handles import ModelChoice
from app.services.serving.runtime import EngineFactory, ModelRuntime, start_engine
from app.settings import Settings
from backends import registry
from backends.base import GenerationParams, SavedCaches
from backends.hardware import HardwareInventory, probe, with_current_memory
from backends.plan import Preferences
from models.embedded import embedded_chat_model

if TYPE_CHECKING:
    from app.services.workers import PairedWorker


@dataclass
class Services:
    settings: Settings
    paths: DataPaths
    inventory: HardwareInventory
    store: ConversationStore
    runtime: ModelRuntime
    control: ModelControl
    chat: ChatService
    documents: LazyDocuments
    cpu: CpuSharing

    def model_choice(self) -> ModelChoice:
        """The choice in force (what is loaded, else what Hearth starts with)."""
        return self.control.choice

    def generation_params(
        self,
        adapter: str | None = None,
        adapter_scale: float = 1.0,
        conversation_id: str | None = None,
        collection: str | None = None,
    ) -> GenerationParams:
        """The settings' sampling, answering with the LoRA adapter ``adapter`` when one is named (checked now
        against the model in use, so a mismatch is told before anything loads), else with the one attached for
        the conversation, the collection or every answer."""
        params = generation_params(self.settings)
        if not adapter:
            return self._with_attached(params, conversation_id, collection)
        from app.services.catalog.models import open_model_store
        from app.services.training.tuning import adapter_for

        path = self.control.choice.path
        store = open_model_store(self.paths)
        try:
            sha = store.sha256_for(path)
        finally:
            store.close()
        _, use = adapter_for(self.paths, adapter, sha, adapter_scale)
        return dataclasses.replace(params, adapter=use)

    def _with_attached(
        self, params: GenerationParams, conversation_id: str | None, collection: str | None
    ) -> GenerationParams:
        """``params`` with the adapter attached for this answer (Tuning tab, hearth adapters attach), if any."""
        from app.services.training.tuning import attached_use

        use = attached_use(self.paths, self.control.choice.path, conversation_id, collection)
        return dataclasses.replace(params, adapter=use) if use is not None else params

    def delete_conversation(self, conversation_id: str) -> None:
        """The conversation, the adapter attached for it, and the model caches saved from its answers."""
        from app.services.training.tuning import forget_scope
        from backends.llamacpp.caches.saved_slots import forget_owner
        from models.adapters import conversation_scope

        self.store.delete(conversation_id)
        forget_scope(self.paths, conversation_scope(conversation_id))
        self.runtime.forget_owner(conversation_id)  # what its slots hold now, before the files (it saves none)
        forget_owner(self.paths.conversation_cache_dir, conversation_id)

    def close(self) -> None:
        self.runtime.close()
        self.store.close()
        self.documents.close()


# Whether the person started Hearth with the Hugging Face Hub kept off (their own HF_HUB_OFFLINE), read before
# Hearth sets it for everything else: installing from the hub, which they ask for by name, honours only theirs.
_PERSON_KEEPS_HUB_OFFLINE = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def person_keeps_hub_offline() -> bool:
    return _PERSON_KEEPS_HUB_OFFLINE


def enforce_offline() -> None:
    """Nothing may phone home: no hub lookups, no analytics, no telemetry."""
    from backends.hardware import block_telemetry_modules

    block_telemetry_modules()
    for key, value in {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "ANONYMIZED_TELEMETRY": "False",
        "DO_NOT_TRACK": "1",
    }.items():
        os.environ.setdefault(key, value)


def model_choice(settings: Settings, inventory: HardwareInventory | None = None) -> ModelChoice:
    """What to load: --model / HEARTH_MODEL__PATH if given, else the model chosen in the catalog, else the best
    installed chat model that fits this machine, else the embedded model."""
    return start_choice(settings, inventory or probe()).choice


def start_choice(settings: Settings, inventory: HardwareInventory) -> StartChoice:
    """:func:`model_choice`, with the rule that picked the model (shown where the page and CLI name it)."""
    from app.services.catalog.models import start_model
    from models.default import RULE_WORDS

    paths = resolve_data_paths(settings.home)
    paired = _pipeline_paired(settings)
    prefs = preferences(settings, paired)
    flag = Path(settings.model.path).expanduser() if settings.model.path else None
    pick = start_model(paths, inventory, prefs, flag)
    path, why = (pick.path, pick.why) if pick else (embedded_chat_model(), RULE_WORDS["fallback"])
    cache = str(paths.compiled_cache_dir)
    links = tuple(worker.link for worker in paired)
    saved = _saved_caches(settings, paths)
    choice = ModelChoice(path, prefs, settings.generation.seed or 0, cache, links, saved)
    return StartChoice(choice, why)


def _saved_caches(settings: Settings, paths: DataPaths) -> SavedCaches:
    """Where llama.cpp keeps conversations' caches on disk, and kept passages' when passages are kept (0: not on
    disk), and how kept passages are held."""
    conversations = settings.backend.conversation_cache_mb << 20
    passages = settings.backend.passage_cache_mb << 20 if settings.rag.keep_passages else 0
    return SavedCaches(
        str(paths.conversation_cache_dir),
        conversations,
        str(paths.passage_cache_dir),
        passages,
        settings.backend.passage_cache_type,
    )


def measuring(settings: Settings) -> Settings:
    """``settings`` for a benchmark or an evaluation: every prompt is read as it would be the first time, not
    loaded from a conversation's or a passage's cache an earlier run saved (which would time the disk, and could
    round a near tie otherwise than reading does); a benchmark or evaluation keeps passages only when it asks to."""
    backend = settings.backend.model_copy(update={"conversation_cache_mb": 0, "passage_cache_mb": 0})
    rag = settings.rag.model_copy(update={"keep_passages": False})
    return settings.model_copy(update={"backend": backend, "rag": rag})


def preferences(settings: Settings, paired: Sequence[PairedWorker] | None = None) -> Preferences:
    """How the user wants models run. No file is read, except the paired workers' book for the pipeline backend
    when ``paired`` (what :func:`_pipeline_paired` read) is not given."""
    chosen = _pipeline_paired(settings) if paired is None else paired
    return Preferences(
        backend=settings.backend.name,
        threads=settings.backend.threads,
        context_length=settings.model.context_length,
        device=settings.backend.device,
        gpu_layers=settings.backend.gpu_layers,
        slots=settings.backend.slots,
        kv_cache_type=settings.backend.kv_cache_type,
        workers=tuple(worker.address for worker in chosen),
        worker_links=tuple(worker.link_facts for worker in chosen),
    )


def _pipeline_paired(settings: Settings) -> tuple[PairedWorker, ...]:
    """The paired workers the pipeline backend uses: those named, else every paired one (none for other backends)."""
    chosen = registry.choice_named(settings.backend.name)
    if chosen is None or not chosen.uses_workers:
        return ()
    from app.services.workers import WorkerBook

    return WorkerBook(resolve_data_paths(settings.home).workers_file).chosen(settings.backend.workers)


def generation_params(settings: Settings) -> GenerationParams:
    gen = settings.generation
    return GenerationParams(
        temperature=gen.temperature,
        max_new_tokens=gen.max_new_tokens,
        top_p=gen.top_p,
        seed=gen.seed,
        repeat_penalty=gen.repeat_penalty,
        prompt_lookup=settings.backend.prompt_lookup == "auto",
    )


def build_services(
    settings: Settings, inventory: HardwareInventory | None = None, make_engine: EngineFactory = start_engine
) -> Services:
    enforce_offline()
    paths = ensure_data_dir(resolve_data_paths(settings.home))
    # A machine Hearth probed itself is re-read before each plan (free memory moves); an inventory handed in (a
    # test's fixture machine) is taken as it is.
    refresh = with_current_memory if inventory is None else None
    inventory = inventory or probe()
    store = ConversationStore(paths.conversations_db)
    runtime = ModelRuntime(inventory, registry.AUTOMATIC, registry.ALL, make_engine, current_inventory=refresh)
    control = ModelControl(runtime, paths, lambda: start_choice(settings, inventory))
    documents = LazyDocuments(lambda: build_documents(settings, paths))
    chat = ChatService(
        store,
        runtime,
        documents.get,
        top_k=settings.rag.top_k,
        keep_share=settings.rag.passage_recompute if settings.rag.keep_passages else None,
    )
    cpu = CpuSharing(
        runtime,
        _planned_threads(runtime, inventory),
        lambda: chat.answering,
        inventory.physical_cores,
        lambda threads: documents.get().embedder.set_threads(threads),  # indexing has the documents built
    )
    return Services(settings, paths, inventory, store, runtime, control, chat, documents, cpu)


def _planned_threads(runtime: ModelRuntime, inventory: HardwareInventory) -> Callable[[], int]:
    def planned() -> int:
        plan = runtime.status.plan
        return plan.threads if plan is not None else inventory.physical_cores

    return planned
