"""`hearth repair`: check every store, and rebuild each damaged one with everything that can still be kept.

- conversations.db: every readable conversation and message is copied into a new database (messages whose
  conversation row was lost get a "Recovered conversation" to live in);
- models.db: its readable rows are kept, and the model files in Hearth's models folder are registered again;
- index.db (the documents index): its readable rows are kept, then the files it lists that still exist are indexed
  again (only what changed or lost its chunks is embedded);
- the vector store (Chroma): set aside whole, then rebuilt by indexing again every file the index lists.

A damaged file or folder is renamed ``NAME.damaged-STAMP`` beside the new one, never changed or deleted. Each store
yields a :class:`StoreReport` of what was found, done and lost, as it is finished.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from app.paths import DataPaths
from app.services.upkeep.rebuild import TableSalvage, rebuild_database, repair_stamp, set_aside
from app.services.upkeep.store_health import Health, check_database, check_vectors
from app.settings import Settings
from models.shared.errors import HearthError
from models.shared.wording import plural

CONVERSATIONS = "conversation database"
MODELS = "model catalog"
INDEX = "documents index"
VECTORS = "documents vector store"
RECOVERED_TITLE = "Recovered conversation"


@dataclass(frozen=True)
class Note:
    """One line of what re-indexing did; ``lost`` when it is something that could not be saved."""

    text: str
    lost: bool = False


Reindex = Callable[[set[str]], Iterator[Note]]


@dataclass
class StoreReport:
    store: str
    path: Path
    health: Health
    done: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # what could not be saved
    to_do: list[str] = field(default_factory=list)  # what the person has to do

    @property
    def failed(self) -> bool:
        """Something could not be saved, or the store could not even be checked."""
        return bool(self.lost) or self.health.state == "unreadable"


class RepairFailed(HearthError):
    """A store could not be rebuilt (the damaged one is left where it was)."""


class HearthIsRunning(HearthError):
    """`hearth repair` refuses to move files that a running Hearth has open."""


def refuse_if_running(paths: DataPaths) -> None:
    from app.services.serving.instance import read_record

    running = read_record(paths.server_file)
    if running is not None:
        raise HearthIsRunning(
            f"Hearth is running (process {running.pid}, {running.url}) and has these files open.",
            "Stop it first (Ctrl+C where it runs, or close its window), then run `hearth repair` again. "
            "`hearth repair --check` only looks, and works while Hearth runs.",
        )


def check_stores(paths: DataPaths) -> list[StoreReport]:
    """Every store's health, changing nothing."""
    return [
        StoreReport(CONVERSATIONS, paths.conversations_db, check_database(paths.conversations_db)),
        StoreReport(MODELS, paths.models_db, check_database(paths.models_db)),
        StoreReport(INDEX, paths.index_db, check_database(paths.index_db)),
        StoreReport(VECTORS, paths.vectors_dir, check_vectors(paths.vectors_dir)),
    ]


def repair_at_start(settings: Settings, say: Callable[[str], None]) -> list[StoreReport]:
    """What `hearth ui` does before it opens anything: the SQLite stores are checked (quickly), and those found
    damaged are repaired as `hearth repair` would, so the page never has to name a command. The vector store is
    checked (which means starting Chroma) only when a run met damage in it and left its marker, or when the
    tables Chroma reads first are damaged. Nothing is done while another Hearth uses the folder. Returns the
    reports of the stores that were repaired."""
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.serving.instance import read_record

    paths = ensure_data_dir(resolve_data_paths(settings.home))
    databases = [(CONVERSATIONS, paths.conversations_db), (MODELS, paths.models_db), (INDEX, paths.index_db)]
    from rag.store import CHROMA_DB, check_startup_tables, repair_marker

    if read_record(paths.server_file) is not None:
        return []  # another Hearth has these files open
    checked = [StoreReport(name, path, check_database(path)) for name, path in databases]
    marker = repair_marker(paths.vectors_dir)
    vectors_suspect = marker.exists()
    try:
        check_startup_tables(paths.vectors_dir / CHROMA_DB)
    except HearthError:
        vectors_suspect = True
    vectors = check_vectors(paths.vectors_dir) if vectors_suspect else Health("sound")
    checked.append(StoreReport(VECTORS, paths.vectors_dir, vectors))
    if not any(r.health.state == "damaged" for r in checked):
        marker.unlink(missing_ok=True)  # checked again and sound (or "unreadable": `hearth repair --check` says why)
        return []

    def reindex(lost_chunks_of: set[str]) -> Iterator[Note]:
        return reindex_collections(settings, paths, lost_chunks_of, say)

    repaired = [r for r in repair_stores(paths, reindex, checked) if r.health.state == "damaged"]
    marker.unlink(missing_ok=True)
    return repaired


def repair_stores(paths: DataPaths, reindex: Reindex, checked: list[StoreReport]) -> Iterator[StoreReport]:
    """Repair each damaged store of ``checked`` (from :func:`check_stores`). ``reindex(lost_chunks_of)`` indexes
    the listed files again and yields what it did; ``lost_chunks_of`` are the collections whose chunks are gone."""
    stamp = repair_stamp()
    by_store = {report.store: report for report in checked}
    for name, repair in ((CONVERSATIONS, _repair_conversations), (MODELS, _repair_models)):
        report = by_store[name]
        if report.health.state == "damaged":
            _attempt(report, partial(repair, paths, report, stamp))
        yield report

    index, vectors = by_store[INDEX], by_store[VECTORS]
    index_rebuilt = index.health.state == "damaged" and _attempt(
        index, partial(_repair_index, paths, index, stamp, vectors)
    )
    vectors_aside = vectors.health.state == "damaged" and _attempt(
        vectors, partial(_set_vectors_aside, paths, vectors, stamp)
    )
    if (index_rebuilt or vectors_aside) and paths.index_db.exists():
        target = vectors if vectors_aside else index
        _attempt(target, partial(_reindex, paths, reindex, target, vectors_aside))
    yield index
    yield vectors


def _attempt(report: StoreReport, step: Callable[[], None]) -> bool:
    """Run one repair step; a failure is reported (what was kept so far stays kept) instead of ending the repair."""
    try:
        step()
    except (OSError, sqlite3.Error, HearthError) as exc:
        report.lost.append(f"the repair stopped at this step: {exc}")
        return False
    return True


def _set_vectors_aside(paths: DataPaths, report: StoreReport, stamp: str) -> None:
    aside = set_aside(paths.vectors_dir, stamp)
    report.done.append(f"set it aside as {aside.name}; a new one is built from your files below")


def _reindex(paths: DataPaths, reindex: Reindex, report: StoreReport, chunks_lost: bool) -> None:
    from rag.manifest import Manifest

    manifest = Manifest(paths.index_db)
    try:
        names = {info.name for info in manifest.collections()}
    finally:
        manifest.close()
    for note in reindex(names if chunks_lost else set()):
        (report.lost if note.lost else report.done).append(note.text)


def _repair_conversations(paths: DataPaths, report: StoreReport, stamp: str) -> None:
    from app.services.library.conversations import ConversationStore

    def create(path: Path) -> None:
        ConversationStore(path).close()

    def give_messages_a_home(db: sqlite3.Connection) -> None:
        db.execute(
            "INSERT INTO conversations (id, title, system_prompt, created_at, updated_at) "
            "SELECT conversation_id, ?, '', MIN(created_at), MAX(created_at) FROM messages "
            "WHERE conversation_id NOT IN (SELECT id FROM conversations) GROUP BY conversation_id",
            (RECOVERED_TITLE,),
        )
        # A file attached to a conversation of which nothing was kept has nothing to answer in.
        db.execute("DELETE FROM attachments WHERE conversation_id NOT IN (SELECT id FROM conversations)")

    tables = _rebuild(
        paths.conversations_db,
        report,
        stamp,
        create,
        ["conversations", "messages", "attachments"],
        give_messages_a_home,
    )
    kept = {t.table: t.kept for t in tables}
    files = f" and {kept['attachments']} attached files" if kept.get("attachments") else ""
    report.done.append(f"kept {kept['conversations']} conversations and {kept['messages']} messages{files}")
    store = ConversationStore(paths.conversations_db)
    try:
        recovered = [s for s in store.list() if s.title == RECOVERED_TITLE]
    finally:
        store.close()
    if recovered:
        report.done.append(
            f"{len(recovered)} of them lost their title and settings and are listed as {RECOVERED_TITLE!r}"
        )


def _repair_models(paths: DataPaths, report: StoreReport, stamp: str) -> None:
    from app.services.catalog.models import open_model_store
    from models.store import ModelStore

    def create(path: Path) -> None:
        ModelStore(path, paths.models_dir, None).close()

    tables = _rebuild(paths.models_db, report, stamp, create, ["models", "preferences", "model_facts"])
    store = open_model_store(paths)
    try:
        known = {m.path.resolve() for m in store.all()}
        found = (
            sorted(p for p in paths.models_dir.glob("*.gguf") if not p.name.startswith("."))
            if paths.models_dir.exists()
            else []
        )
        added = 0
        for path in found:
            if path.resolve() in known:
                continue
            try:
                store.add(path)
                added += 1
            except HearthError as exc:
                report.done.append(f"left out {path.name} from the models folder: {exc.message}")
        has_default = store.default() is not None
    finally:
        store.close()
    kept = next(t.kept for t in tables if t.table == "models")
    report.done.append(f"kept {plural(kept, 'model')}; registered {added} more from {paths.models_dir}")
    if not next(t for t in tables if t.table == "models").complete:
        report.to_do.append(
            "models imported from other folders may be missing: import them again (hearth models import PATH)"
        )
    if not has_default and not next(t for t in tables if t.table == "preferences").complete:
        report.to_do.append("choose the default model again: hearth models default ID")


def _repair_index(paths: DataPaths, report: StoreReport, stamp: str, vectors: StoreReport) -> None:
    from rag.manifest import Manifest, store_name_for
    from rag.retrieval.embeddings import default_embedder

    def create(path: Path) -> None:
        Manifest(path).close()

    def restore_collections(db: sqlite3.Connection) -> None:
        # Files name their collection; a collection whose own row was lost is made again from them.
        orphaned = db.execute(
            "SELECT collection, MIN(updated_at) FROM files WHERE collection NOT IN (SELECT name FROM collections) "
            "GROUP BY collection"
        ).fetchall()
        embedder = default_embedder().name
        for name, created in orphaned:
            db.execute(
                "INSERT INTO collections (name, store_name, embedder, created_at) VALUES (?,?,?,?)",
                (name, store_name_for(name), embedder, created or time.time()),
            )

    _rebuild(paths.index_db, report, stamp, create, ["collections", "files"], restore_collections)
    manifest = Manifest(paths.index_db)
    try:
        collections = manifest.collections()
        files = sum(len(manifest.files(info.name)) for info in collections)
    finally:
        manifest.close()
    report.done.append(f"kept {plural(len(collections), 'collection')} listing {plural(files, 'file')}")
    if collections or vectors.health.state != "sound":
        return
    # Nothing of the index could be read, but the vector store still holds the collections' chunks.
    for store_name, chunks in sorted(vectors.health.collections.items()):
        report.to_do.append(
            f"add the documents of the collection stored as {store_name} ({chunks} passages) again: "
            "hearth ingest FOLDER --collection NAME"
        )


def _rebuild(
    path: Path,
    report: StoreReport,
    stamp: str,
    create: Callable[[Path], None],
    tables: list[str],
    fix: Callable[[sqlite3.Connection], None] | None = None,
) -> list[TableSalvage]:
    """Rebuild a damaged database in place, its old file set aside."""
    rebuilt = path.with_name(f"{path.name}.rebuilt-{stamp}")
    try:
        salvaged = rebuild_database(path, rebuilt, create, tables, fix)
    except (OSError, sqlite3.Error, HearthError) as exc:
        rebuilt.unlink(missing_ok=True)
        raise RepairFailed(f"Could not rebuild {path.name} ({exc}).", "The damaged file is as it was.") from exc
    aside = set_aside(path, stamp)
    rebuilt.replace(path)
    report.done.append(f"set the damaged file aside as {aside.name}")
    report.lost.extend(t.describe_loss() for t in salvaged if not t.complete)
    return salvaged


def reindex_collections(
    settings: Settings, paths: DataPaths, lost_chunks_of: set[str], say: Callable[[str], None]
) -> Iterator[Note]:
    """Index again the files each collection lists that still exist (unchanged files whose chunks are intact are
    only looked at). For collections in ``lost_chunks_of`` the vector store was rebuilt: files gone from disk
    cannot be indexed again, so they leave the collection and are reported lost."""
    from app.services.library.documents import build_documents
    from rag.ingest import FileOutcome

    documents = build_documents(settings, paths)
    try:
        for info in documents.manifest.collections():
            records = documents.manifest.files(info.name)
            present = [Path(path) for path in records if Path(path).exists()]
            gone = sorted(path for path, record in records.items() if not Path(path).exists())
            if info.name in lost_chunks_of and gone:
                for path in gone:
                    documents.ingestor.remove_file(info.name, path)
                names = ", ".join(Path(path).name for path in gone)
                yield Note(
                    f"collection {info.name!r}: {len(gone)} files no longer on disk, so not indexed: {names}", True
                )
            say(f"indexing collection {info.name!r} again ({len(present)} files)…")
            counts = {"indexed": 0, "unchanged": 0, "skipped": 0, "removed": 0}
            try:
                for event in documents.ingestor.ingest(present, info.name):
                    if isinstance(event, FileOutcome):
                        counts[event.outcome] += 1
            except HearthError as exc:
                yield Note(f"collection {info.name!r} could not be indexed again: {exc.message} {exc.remedy}", True)
                continue
            yield Note(
                f"collection {info.name!r}: {counts['indexed']} files indexed again, {counts['unchanged']} intact"
                + (f", {counts['skipped']} skipped as before" if counts["skipped"] else "")
            )
    finally:
        documents.close()
