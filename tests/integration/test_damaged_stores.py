"""Real files damaged the way disks and crashes damage them (pages overwritten in the middle of a SQLite file,
Chroma's files garbled), then what Hearth says about them and what `hearth repair` keeps."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from app.paths import DataPaths, ensure_data_dir, resolve_data_paths
from app.services.catalog.models import default_model_path, open_model_store
from app.services.library.attachment_store import AttachmentStore
from app.services.library.conversations import ConversationStore
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from models.shared.database import DamagedStore
from rag.attachments import AttachedPassage, ReadAttachment
from rag.chunking import Chunk
from rag.retrieval.embeddings import Embedder
from rag.store import CHROMA_DB, VectorStore, repair_marker
from tests.helpers import write_tiny_gguf

pytestmark = pytest.mark.integration

COLLECTION = "harbour notes"
FILES = {
    "tides.txt": "Spring tides at Skerry harbour come two days after the full moon and rise four metres.",
    "lamp.txt": "The lighthouse lamp burns colza oil and is trimmed by the keeper at dusk and midnight.",
    "boats.txt": "The ferry Aurora carries twelve passengers and leaves the north pier at nine.",
}


# --- damaging real files --------------------------------------------------------------------------------------


def page_size(path: Path) -> int:
    size = int.from_bytes(path.read_bytes()[16:18], "big")
    return 65536 if size == 1 else size


def overwrite_pages(path: Path, pages: Iterable[int], seed: int = 7) -> None:
    """Overwrite whole pages (numbered from 1, as SQLite does) with random bytes."""
    size = page_size(path)
    noise = random.Random(seed)
    with path.open("r+b") as file:
        for page in pages:
            file.seek((page - 1) * size)
            file.write(noise.randbytes(size))


def root_page(path: Path, name: str) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0])


def hearth(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"HEARTH_HOME": str(home)}
    command = [sys.executable, "-m", "app", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def assert_clean(run: subprocess.CompletedProcess[str]) -> None:
    """No traceback and no Rust panic reached the terminal."""
    assert "Traceback" not in run.stderr + run.stdout
    assert "panicked" not in run.stderr


def set_aside(home: Path, name: str) -> Path:
    (aside,) = [
        p for p in home.iterdir() if p.name.startswith(f"{name}.damaged-") and not p.name.endswith(("-wal", "-shm"))
    ]
    return aside


# --- fixtures ---------------------------------------------------------------------------------------------------


@pytest.fixture
def paths(isolated_home: Path) -> DataPaths:
    return ensure_data_dir(resolve_data_paths(isolated_home))


def documents_of(paths: DataPaths, embedder: Embedder) -> DocumentServices:
    return build_documents(load_settings(), paths, embedder)


@pytest.fixture
def corpus(tmp_path: Path, paths: DataPaths, embedder: Embedder) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    documents = documents_of(paths, embedder)
    try:
        list(documents.ingestor.ingest([folder], COLLECTION))
    finally:
        documents.close()
    return folder


def found_files(paths: DataPaths, embedder: Embedder, question: str) -> list[str]:
    from chromadb.api.shared_system_client import SharedSystemClient

    # Chroma keeps one client per folder in a process; after a repair replaced the folder, this test process
    # must open the new one (Hearth's own processes never held the old one: repair checks in a subprocess).
    SharedSystemClient.clear_system_cache()
    documents = documents_of(paths, embedder)
    try:
        return [Path(p.chunk.path).name for p in documents.retriever.search(COLLECTION, question, top_k=3).passages]
    finally:
        documents.close()


# --- conversations.db -------------------------------------------------------------------------------------------


def test_conversations_on_undamaged_pages_survive_a_repair(paths: DataPaths) -> None:
    store = ConversationStore(paths.conversations_db)
    written: dict[int, str] = {}
    conversations = []
    for number in range(300):
        conversation = store.create("be brief")
        conversations.append(conversation.id)
        for turn in range(3):
            for role in ("user", "assistant"):
                text = f"{role} {number}.{turn}: " + "the tide tables of the harbour, " * 8
                written[store.append(conversation.id, role, text).id] = text
    store.close()
    pages = paths.conversations_db.stat().st_size // page_size(paths.conversations_db)
    overwrite_pages(paths.conversations_db, range(pages // 2, pages // 2 + 4))
    damaged_bytes = paths.conversations_db.read_bytes()

    with pytest.raises(DamagedStore) as caught:
        ConversationStore(paths.conversations_db).list()
    assert caught.value.path == paths.conversations_db
    assert "hearth repair" in caught.value.remedy

    checked = hearth(paths.root, "repair", "--check")
    assert checked.returncode == 1
    assert "conversation database" in checked.stdout and "DAMAGED" in checked.stdout
    assert paths.conversations_db.read_bytes() == damaged_bytes  # checking changes nothing

    repaired = hearth(paths.root, "repair")
    assert_clean(repaired)
    assert repaired.returncode == 1, repaired.stdout  # some messages were on the damaged pages
    assert "not saved: table messages: could not read rows" in repaired.stdout
    assert set_aside(paths.root, "conversations.db").read_bytes() == damaged_bytes  # kept, unchanged

    store = ConversationStore(paths.conversations_db)
    try:
        listed = {summary.id for summary in store.list()}
        assert listed == set(conversations)  # the conversations table sat on undamaged pages
        kept = {m.id: m.content for cid in conversations for m in store.get(cid).messages}
    finally:
        store.close()
    assert len(written) * 0.8 < len(kept) < len(written)
    assert all(written[message_id] == text for message_id, text in kept.items())
    assert hearth(paths.root, "repair", "--check").returncode == 0


def test_messages_whose_conversation_was_lost_get_a_recovered_conversation(paths: DataPaths) -> None:
    store = ConversationStore(paths.conversations_db)
    first = store.create("s")
    store.append(first.id, "user", "where is the ferry timetable?")
    passage = AttachedPassage(0, "The ferry leaves at nine.", 1, None)
    vectors = np.ones((1, 4), dtype=np.float32) / 2
    AttachmentStore(store.database).add(
        first.id, ReadAttachment("ferry.pdf", "ab" * 32, "The ferry leaves at nine.", 1, (passage,), vectors, "m")
    )
    store.close()
    pages = root_page(paths.conversations_db, "conversations")
    overwrite_pages(paths.conversations_db, [pages])

    repaired = hearth(paths.root, "repair")
    assert_clean(repaired)
    assert "listed as 'Recovered conversation'" in repaired.stdout
    assert "and 1 attached files" in repaired.stdout
    store = ConversationStore(paths.conversations_db)
    try:
        recovered = store.get(first.id)
        (attached,) = AttachmentStore(store.database).load(first.id)
    finally:
        store.close()
    assert [m.content for m in recovered.messages] == ["where is the ferry timetable?"]
    assert attached.file.passages == (passage,) and attached.file.vectors.tolist() == vectors.tolist()


def test_the_page_says_restart_and_hearth_ui_repairs_the_damage_as_it_starts(paths: DataPaths) -> None:
    import socket

    store = ConversationStore(paths.conversations_db)
    first = store.create("s")
    store.append(first.id, "user", "where is the ferry timetable?")
    store.close()
    overwrite_pages(paths.conversations_db, [root_page(paths.conversations_db, "conversations")])
    with pytest.raises(DamagedStore) as caught:
        ConversationStore(paths.conversations_db).list()
    assert "hearth repair" not in caught.value.for_page  # the page names no command: it says to restart
    assert "start it again" in caught.value.for_page

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = os.environ | {"HEARTH_HOME": str(paths.root)}
    command = [sys.executable, "-m", "app", "ui", "--backend", "fake", "--port", str(port)]
    ui = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert ui.stdout is not None
        lines = []
        for line in ui.stdout:
            lines.append(line)
            if "Hearth is running" in line or len(lines) > 200:
                break
    finally:
        ui.terminate()
        ui.wait(timeout=30)
    said = "".join(lines)
    assert "The conversation database was damaged; repaired it" in said, said
    assert "Hearth is running" in said
    assert set_aside(paths.root, "conversations.db").exists()
    store = ConversationStore(paths.conversations_db)
    try:
        assert [m.content for m in store.get(first.id).messages] == ["where is the ferry timetable?"]
    finally:
        store.close()


# --- models.db --------------------------------------------------------------------------------------------------


def test_a_damaged_model_catalog_falls_back_to_the_embedded_model_and_is_rebuilt(
    paths: DataPaths, caplog: pytest.LogCaptureFixture
) -> None:
    paths.models_dir.mkdir()
    model = write_tiny_gguf(paths.models_dir / "tiny-f32.gguf")
    store = open_model_store(paths)
    store.add(model)
    store.set_default("tiny-f32.gguf")
    store.close()
    assert default_model_path(paths) == model
    overwrite_pages(paths.models_db, [1])  # the header and the schema: nothing of the catalog can be read

    assert default_model_path(paths) is None  # chat starts with the embedded model instead of not at all
    assert "using the embedded model" in caplog.text and "hearth repair" in caplog.text
    listed = hearth(paths.root, "models", "list")
    assert_clean(listed)
    assert listed.returncode == 1 and f"The model catalog {paths.models_db} is damaged" in listed.stderr

    repaired = hearth(paths.root, "repair")
    assert_clean(repaired)
    assert repaired.returncode == 1  # the default choice was in the catalog only
    assert "registered 1 more" in repaired.stdout
    assert "hearth models default" in repaired.stdout
    store = open_model_store(paths)
    try:
        assert model in [m.path for m in store.all()]
    finally:
        store.close()


# --- index.db (the documents index) ------------------------------------------------------------------------------


def test_a_damaged_documents_index_stops_documents_only_and_is_rebuilt(
    paths: DataPaths, corpus: Path, embedder: Embedder
) -> None:
    overwrite_pages(paths.index_db, [root_page(paths.index_db, "sqlite_autoindex_files_1")])
    for command in (("ingest", str(corpus), "--collection", COLLECTION), ("collections",)):
        refused = hearth(paths.root, *command)
        assert_clean(refused)
        assert refused.returncode == 1
        assert f"The documents index {paths.index_db} is damaged" in refused.stderr
        assert "hearth repair" in refused.stderr and "chat works without documents" in refused.stderr

    repaired = hearth(paths.root, "repair")
    assert_clean(repaired)
    assert repaired.returncode == 0, repaired.stdout  # only an index page was hit: every row was read back
    assert "kept 1 collection listing 3 files" in repaired.stdout
    assert "0 files indexed again, 3 intact" in repaired.stdout
    assert found_files(paths, embedder, "When do spring tides come?")[0] == "tides.txt"


def test_an_unreadable_index_says_which_collections_to_add_again(paths: DataPaths, corpus: Path) -> None:
    overwrite_pages(paths.index_db, [1])
    repaired = hearth(paths.root, "repair")
    assert_clean(repaired)
    assert repaired.returncode == 1
    assert "to do: add the documents of the collection stored as kb-harbour-notes-" in repaired.stdout
    assert "(3 passages) again: hearth ingest FOLDER --collection NAME" in repaired.stdout


# --- the vector store (Chroma) -----------------------------------------------------------------------------------


def test_damage_chroma_would_panic_on_gives_a_typed_error_and_no_panic(paths: DataPaths, corpus: Path) -> None:
    database = paths.vectors_dir / CHROMA_DB
    overwrite_pages(database, [root_page(database, "sqlite_autoindex_migrations_1")])
    for command in (("collections",), ("ask", "When do spring tides come?", "--collection", COLLECTION)):
        refused = hearth(paths.root, *command)
        assert_clean(refused)
        assert refused.returncode == 1
        assert f"The documents vector store {paths.vectors_dir} is damaged" in refused.stderr
        assert "Until then, chat works without documents." in refused.stderr


def test_a_rust_panic_inside_chroma_becomes_a_typed_error(
    paths: DataPaths, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without Hearth's own look at the tables first, Chroma 1.5 panics in Rust on this damage
    (``pyo3_runtime.PanicException``, a BaseException); the boundary still turns it into the typed error."""
    fresh = paths.root / "vectors-copy"  # a folder this process's Chroma has not opened (it caches clients by folder)
    shutil.copytree(paths.vectors_dir, fresh)
    database = fresh / CHROMA_DB
    overwrite_pages(database, [root_page(database, "sqlite_autoindex_migrations_1")])
    monkeypatch.setattr("rag.store.check_startup_tables", lambda path: None)
    with pytest.raises(DamagedStore, match="Chroma stopped with an internal panic"):
        VectorStore(fresh)


def test_a_garbled_vector_index_segment_gives_a_typed_error(paths: DataPaths) -> None:
    store = VectorStore(paths.vectors_dir)
    vectors = np.random.default_rng(3).standard_normal((100, 384)).astype(np.float32)
    for number in range(12):  # enough chunks for Chroma to keep a persisted HNSW segment
        chunks = [Chunk(f"c{number}-{i}", f"passage {number}.{i}", i, None, None) for i in range(100)]
        store.replace_file("kb-segment-test", "e", f"/notes/{number}.txt", chunks, vectors)
    (header,) = paths.vectors_dir.glob("*/header.bin")
    header.write_bytes(bytes(range(100)))
    reopened = paths.root / "vectors-copy"
    shutil.copytree(paths.vectors_dir, reopened)  # a folder this process's Chroma has not opened
    with pytest.raises(DamagedStore) as caught:
        VectorStore(reopened).count("kb-segment-test", "e")
    assert caught.value.path == reopened and "hearth repair" in caught.value.remedy
    # Damage the start-up check cannot see: the next start is told to check the store (the page says restart).
    assert repair_marker(reopened).exists()
    assert "start it again" in caught.value.for_page and "hearth repair" not in caught.value.for_page


def test_starting_hearth_repairs_a_damaged_vector_store(paths: DataPaths, corpus: Path, embedder: Embedder) -> None:
    from chromadb.api.shared_system_client import SharedSystemClient

    from app.services.upkeep.repair import VECTORS, repair_at_start

    database = paths.vectors_dir / CHROMA_DB
    overwrite_pages(database, [root_page(database, "collections")])
    # A new `hearth ui` has not opened Chroma yet; this test process has (indexing the corpus), and Chroma keeps
    # one client per folder in a process.
    SharedSystemClient.clear_system_cache()
    said: list[str] = []
    repaired = repair_at_start(load_settings(), said.append)
    assert [r.store for r in repaired] == [VECTORS]
    assert "3 files indexed again, 0 intact" in " ".join(repaired[0].done + said), (repaired[0].done, said)
    assert (set_aside(paths.root, "vectors") / CHROMA_DB).exists()
    assert not repair_marker(paths.vectors_dir).exists()
    assert found_files(paths, embedder, "What oil does the lighthouse lamp burn?")[0] == "lamp.txt"
    assert repair_at_start(load_settings(), said.append) == []  # sound now: nothing more to do


def test_repair_rebuilds_the_vector_store_from_the_files_and_names_what_is_gone(
    paths: DataPaths, corpus: Path, embedder: Embedder
) -> None:
    database = paths.vectors_dir / CHROMA_DB
    overwrite_pages(database, [root_page(database, "collections")])
    (corpus / "boats.txt").unlink()  # its text was only in the damaged store now

    repaired = hearth(paths.root, "repair")
    assert_clean(repaired)
    assert repaired.returncode == 1
    assert "documents vector store" in repaired.stdout and "DAMAGED" in repaired.stdout
    assert "1 files no longer on disk, so not indexed: boats.txt" in repaired.stdout
    assert "2 files indexed again, 0 intact" in repaired.stdout
    assert (set_aside(paths.root, "vectors") / CHROMA_DB).exists()

    assert hearth(paths.root, "repair", "--check").returncode == 0
    assert found_files(paths, embedder, "What oil does the lighthouse lamp burn?")[0] == "lamp.txt"
    assert "boats.txt" not in found_files(paths, embedder, "When does the ferry Aurora leave?")
