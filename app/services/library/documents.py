"""Documents: collections, ingestion and their status. Built on demand, because Chroma and the embedding model
take seconds to load and plain chat does not need them."""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.paths import DataPaths
from app.services.library.chroma_choice import ServerChoice, current_choice
from app.settings import Settings
from models.shared.errors import HearthError
from rag.ingest import Ingestor
from rag.manifest import CollectionError, CollectionInfo, FileRecord, Manifest
from rag.reading.limits import ReadLimits
from rag.reading.reader import ReaderProcess
from rag.retrieval.embeddings import Embedder, configured_embedder
from rag.retrieval.retriever import Retriever
from rag.store import VectorStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CollectionSummary:
    info: CollectionInfo
    indexed_files: int
    skipped_files: int
    chunks: int


@dataclass
class DocumentServices:
    manifest: Manifest
    store: VectorStore
    embedder: Embedder
    ingestor: Ingestor
    retriever: Retriever
    uploads_dir: Path
    # Reads files attached to a conversation: a process of its own, so that attaching never waits behind indexing.
    attachment_reader: ReaderProcess = field(default_factory=ReaderProcess)  # starts its child on first use
    max_file_bytes: int = 100 << 20
    excerpts: bool = False  # give the best sentences of more passages instead of the first passages whole
    adapters_dir: Path | None = None  # the tuned adapters' folder, whose attachment to a deleted collection goes too
    follow_up_search: str = "question"  # "with-previous": a follow-up is searched with the question before it too

    def uploads_folder(self, info: CollectionInfo) -> Path:
        """Where copies of files uploaded through the page are kept for ``info`` (Hearth owns these)."""
        return self.uploads_dir / info.store_name

    def tidy_uploads(self, info: CollectionInfo) -> list[Path]:
        """Undo what a run killed mid-upload left in ``info``'s upload folder (see ``tidy_copies``)."""
        from app.services.library.uploads import tidy_copies

        removed = tidy_copies(self.uploads_folder(info), self.manifest.files(info.name))
        if removed:
            log.info("collection %r: removed %d upload copies it does not list", info.name, len(removed))
        return removed

    def remove_file(self, collection: str, path: str) -> CollectionInfo:
        """Take ``path`` out of the collection; delete it too if it is Hearth's own uploaded copy."""
        from app.services.library.uploads import discard_copy

        info = self.manifest.get(collection)
        self.ingestor.remove_file(info.name, path)
        discard_copy(Path(path), self.uploads_folder(info))
        return info

    def delete_collection(self, collection: str) -> CollectionInfo:
        """Drop the index, Hearth's uploaded copies and the adapter attached to the collection (a new collection of
        the same name starts without one); files added by path are never touched."""
        info = self.manifest.get(collection)
        self.ingestor.delete_collection(info.name)
        shutil.rmtree(self.uploads_folder(info), ignore_errors=True)
        if self.adapters_dir is not None:
            from models.adapters import AdapterStore, collection_scope

            AdapterStore(self.adapters_dir).detach(collection_scope(info.name))
        return info

    def copy_collection(
        self, name: str, to_server: bool, copied: Callable[[int, int], object] = lambda done, total: None
    ) -> CollectionInfo:
        """Copy the collection called ``name`` between the data folder and the Chroma server, passages, vectors and
        files' records as they are (nothing is read or embedded again); ``copied(done, total)`` after each page.
        The source stays. Where both places hold the name, the data folder's is the one used."""
        from rag.server_collections import CombinedManifest

        manifest = self.manifest
        if not isinstance(manifest, CombinedManifest):
            raise CollectionError(
                "No Chroma server is set, so there is nowhere to copy the collection to or from.",
                "Set HEARTH_RAG__CHROMA_URL to the server's address (docs/chroma-server.md).",
                page_remedy="Start Hearth with HEARTH_RAG__CHROMA_URL set to the server's address.",
            )
        source = manifest.held(name, on_server=not to_server)
        if source is None:
            here = "on the Chroma server" if not to_server else "in the data folder"
            raise CollectionError(
                f"There is no collection called {name!r} {here} to copy.",
                "See where each collection lives with: hearth collections",
                page_remedy="The Documents tab says where each collection lives.",
            )
        target = manifest.create_in(source.name, source.embedder, on_server=to_server)
        total = self.store.count(source.store_name, source.embedder)
        done = 0
        try:
            for page in self.store.pages(source.store_name, source.embedder):
                self.store.add_page(target.store_name, target.embedder, page)
                done += len(page.ids)
                copied(done, total)
            records = manifest.files_held(source.name, on_server=not to_server)
            manifest.record_all(target.name, records.values(), on_server=to_server)
        except BaseException:
            manifest.delete_held(target.name, on_server=to_server)  # no half copy left to be found
            with contextlib.suppress(HearthError):  # the server may be what failed: its half copy is unlisted
                self.store.drop(target.store_name)
            raise
        return target

    def summaries(self) -> list[CollectionSummary]:
        return [self.summary(info) for info in self.manifest.collections()]

    def summary(self, info: CollectionInfo) -> CollectionSummary:
        files = self.manifest.files(info.name).values()
        return CollectionSummary(
            info,
            indexed_files=sum(1 for f in files if f.status == "indexed"),
            skipped_files=sum(1 for f in files if f.status == "skipped"),
            chunks=sum(f.chunks for f in files),
        )

    def files(self, collection: str) -> list[FileRecord]:
        info = self.manifest.get(collection)
        return list(self.manifest.files(info.name).values())

    def passages(self, collection: str) -> list[tuple[str | None, str]]:
        """Every passage of ``collection`` as (section, text), file by file in reading order."""
        info = self.manifest.get(collection)
        chunks = self.store.all_chunks(info.store_name, info.embedder)
        return [(c.section, c.text) for c in sorted(chunks, key=lambda c: (c.path, c.index))]

    def close(self) -> None:
        self.ingestor.close()
        self.attachment_reader.close()
        self.manifest.close()


class LazyDocuments:
    """Builds the document services on first use, once, from any thread (the page warms it up in the background
    so the first question about a collection does not wait for Chroma and the embedding model)."""

    def __init__(self, build: Callable[[], DocumentServices]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._value: DocumentServices | None = None

    def get(self) -> DocumentServices:
        with self._lock:
            if self._value is None:
                self._value = self._build()
            return self._value

    def close(self) -> None:
        with self._lock:
            if self._value is not None:
                self._value.close()
                self._value = None


def read_limits(settings: Settings) -> ReadLimits:
    """What reading one document may cost (text, pages, time, memory), from the settings."""
    return ReadLimits(
        max_text_chars=settings.rag.max_text_chars,
        max_pdf_pages=settings.rag.max_pdf_pages,
        timeout_s=settings.rag.read_timeout_s,
        memory_bytes=settings.rag.read_memory_mb << 20,
    )


def build_documents(settings: Settings, paths: DataPaths, embedder: Embedder | None = None) -> DocumentServices:
    manifest = Manifest(paths.index_db)
    store = VectorStore(paths.vectors_dir)
    choice = current_choice(settings, paths.chroma_server_file)
    if choice is not None:
        manifest, store = _with_server(paths, manifest, store, choice)
    embedder = embedder or configured_embedder(settings.rag.embedder_runtime)
    reader = ReaderProcess(read_limits(settings))
    ingestor = Ingestor(manifest, store, embedder, max_file_bytes=settings.rag.max_file_mb << 20, reader=reader)
    reranker = None
    if settings.rag.reranker_path is not None:
        from rag.retrieval.rerank import CrossEncoderReranker

        reranker = CrossEncoderReranker(settings.rag.reranker_path)
    retriever = Retriever(manifest, store, embedder, reranker)
    attachment_reader = ReaderProcess(read_limits(settings))
    return DocumentServices(
        manifest,
        store,
        embedder,
        ingestor,
        retriever,
        paths.uploads_dir,
        attachment_reader,
        settings.rag.max_file_mb << 20,
        settings.rag.excerpts,
        paths.adapters_dir,
        settings.rag.follow_up_search,
    )


def _with_server(
    paths: DataPaths, local: Manifest, store: VectorStore, choice: ServerChoice
) -> tuple[Manifest, VectorStore]:
    """The data folder's collections and the Chroma server's as one (rag/server_collections.py). The address is
    checked now; the server is reached when one of its collections is first used."""
    from rag.server_collections import SERVER_PREFIX, CombinedManifest, RoutedStore, server_manifest_path
    from rag.server_ledger import Ledger, SharedManifest, listed_passages

    server = choice.server()
    paths.chroma_servers_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    mirror_path = server_manifest_path(paths.chroma_servers_dir, server)
    mirror = Manifest(mirror_path, store_prefix=SERVER_PREFIX)
    on_server = SharedManifest(Ledger(server), mirror, mirror_path, SERVER_PREFIX)
    return CombinedManifest(local, on_server, server.shown), RoutedStore(
        store, lambda: VectorStore.on_server(server, listed_passages(on_server))
    )
