"""Chunks left in the vector store by a run killed between storing a file and recording it: a real SIGKILL at that
exact point, then the file is deleted and ingestion runs again; the retriever must no longer return them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from rag.retrieval.embeddings import Embedder

pytestmark = pytest.mark.integration

COLLECTION = "field notes"
SECRET = "The vault combination is quokka-7791, kept by the zanzibar archivist."
KEPT = "Lamp oil is ordered every spring from the harbour chandlery."

# Runs the real Ingestor on the real stores; just before the manifest records ``target`` as indexed (its chunks
# are already in Chroma), the process sends itself SIGKILL, or, with a ``hold`` file, waits until that file is gone.
KILLER = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.library.documents import build_documents
    from app.settings import load_settings
    from rag.manifest import Manifest

    folder, collection, target, mode = sys.argv[1:5]
    record = Manifest.record

    def record_then_die(self, name, entry):
        if entry.path.endswith(target) and entry.status == "indexed":
            if mode.endswith("kill"):
                os.kill(os.getpid(), signal.SIGKILL)
            Path(mode + ".waiting").touch()
            while Path(mode).exists():
                time.sleep(0.05)
        record(self, name, entry)

    Manifest.record = record_then_die
    settings = load_settings()
    documents = build_documents(settings, ensure_data_dir(resolve_data_paths(settings.home)))
    if mode.startswith("upload"):  # as the page adds files: copies kept in the data folder, then indexed
        from app.services.library.uploads import add_uploads
        from backends.base import CancelToken

        events = add_uploads(documents, collection, sorted(Path(folder).iterdir()), CancelToken())
    else:
        events = documents.ingestor.ingest([Path(folder)], collection)
    for event in events:
        pass
    documents.close()
    """
)


def open_documents(embedder: Embedder) -> DocumentServices:
    settings = load_settings()
    paths = resolve_data_paths(settings.home)
    paths.root.mkdir(parents=True, exist_ok=True)
    return build_documents(settings, paths, embedder)


def write_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "a-kept.txt").write_text(KEPT)
    (folder / "b-secret.txt").write_text(SECRET)
    return folder / "b-secret.txt"


def run_killer(folder: Path, mode: str, home: Path) -> subprocess.Popen[str]:
    env = os.environ | {"HEARTH_HOME": str(home)}
    command = [sys.executable, "-c", KILLER, str(folder), COLLECTION, "b-secret.txt", mode]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def after_a_kill(folder: Path, mode: str, home: Path, embedder: Embedder) -> DocumentServices:
    """Run the killer over ``folder`` until it dies by SIGKILL at the record, then open the stores it left."""
    killed = run_killer(folder, mode, home)
    _, errors = killed.communicate(timeout=300)
    assert killed.returncode == -signal.SIGKILL, errors
    return open_documents(embedder)


def secret_passages(documents: DocumentServices) -> list[str]:
    found = documents.retriever.search(COLLECTION, "vault combination zanzibar archivist", top_k=5).passages
    return [p.chunk.path for p in found if p.chunk.path.endswith("b-secret.txt")]


def test_chunks_left_by_a_killed_run_are_removed_once_their_file_is_deleted(
    isolated_home: Path, tmp_path: Path, embedder: Embedder
) -> None:
    secret = write_folder(tmp_path / "notes")
    documents = after_a_kill(secret.parent, "kill", isolated_home, embedder)
    try:
        info = documents.manifest.get(COLLECTION)
        # The state the crash left: the secret's chunks are in Chroma and no manifest row owns them. Search leaves
        # them out (only recorded files' passages are the collection's), but they stay in the store until removed.
        assert str(secret) not in documents.manifest.files(COLLECTION)
        assert documents.store.chunks_of(info.store_name, info.embedder, str(secret))
        assert secret_passages(documents) == []
    finally:
        documents.close()

    secret.unlink()
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}
    again = subprocess.run(
        [sys.executable, "-m", "app", "ingest", str(secret.parent), "--collection", COLLECTION],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert "removed    b-secret.txt (a run that was interrupted had left it in the index)" in again.stdout
    assert "Traceback" not in again.stderr

    documents = open_documents(embedder)
    try:
        info = documents.manifest.get(COLLECTION)
        assert secret_passages(documents) == []
        assert documents.store.chunks_of(info.store_name, info.embedder, str(secret)) == []
        assert documents.store.count(info.store_name, info.embedder) == documents.manifest.indexed_chunks(COLLECTION)
        kept = documents.retriever.search(COLLECTION, "lamp oil chandlery", top_k=1).passages
        assert kept and kept[0].chunk.path.endswith("a-kept.txt")
    finally:
        documents.close()


def test_an_upload_copy_a_killed_run_had_not_listed_is_removed_at_the_next_start(
    isolated_home: Path, tmp_path: Path, embedder: Embedder
) -> None:
    secret = write_folder(tmp_path / "dropped")
    documents = after_a_kill(secret.parent, "upload-kill", isolated_home, embedder)
    try:
        info = documents.manifest.get(COLLECTION)
        folder = documents.uploads_folder(info)
        copy = folder / secret.name
        assert copy.exists() and str(copy) not in documents.manifest.files(COLLECTION)  # what the kill left
        documents.ingestor.reconcile(info)
        removed = documents.tidy_uploads(info)  # what the page does at start, after reconciling
        assert copy in removed and not copy.exists()
        listed = documents.manifest.files(COLLECTION)
        assert all(str(kept) in listed for kept in folder.iterdir())
        assert documents.tidy_uploads(info) == []
    finally:
        documents.close()


def test_a_long_running_page_forgets_the_leftovers_in_its_keyword_index(
    isolated_home: Path, tmp_path: Path, embedder: Embedder
) -> None:
    """The page builds its keyword index once and rebuilds it when the collection changes: removing leftovers
    counts as a change. Neither ranking returns the leftovers before or after (no record owns them), and
    reconciling at start-up removes them from the store."""
    secret = write_folder(tmp_path / "notes")
    killed = run_killer(secret.parent, "kill", isolated_home)
    killed.communicate(timeout=300)
    documents = open_documents(embedder)
    try:
        info = documents.manifest.get(COLLECTION)
        built = documents.retriever.keyword_index(info)  # built now
        assert built.chunks and all(not c.path.endswith("b-secret.txt") for c in built.chunks)
        assert documents.store.chunks_of(info.store_name, info.embedder, str(secret))  # the leftovers
        assert secret_passages(documents) == []  # left out of search all the same
        secret.unlink()
        documents.ingestor.reconcile_all()  # what the page does at start-up
        assert documents.retriever.keyword_index(info) is not built  # counted as a change
        assert documents.store.chunks_of(info.store_name, info.embedder, str(secret)) == []
        assert secret_passages(documents) == []
    finally:
        documents.close()


def test_reconciling_waits_for_a_file_being_stored_by_another_process(
    isolated_home: Path, tmp_path: Path, embedder: Embedder
) -> None:
    """Another process has stored a file's chunks and is about to record it: to a reconciliation those chunks
    look like leftovers, so it must wait for the record instead of removing them."""
    secret = write_folder(tmp_path / "notes")
    hold = tmp_path / "hold"
    hold.touch()
    writer = run_killer(secret.parent, str(hold), isolated_home)
    waiting = Path(f"{hold}.waiting")
    deadline = time.monotonic() + 300
    while not waiting.exists():
        assert writer.poll() is None and time.monotonic() < deadline, writer.stderr and writer.stderr.read()
        time.sleep(0.1)

    documents = open_documents(embedder)
    try:
        info = documents.manifest.get(COLLECTION)
        reconciled = threading.Thread(target=documents.ingestor.reconcile, args=(info,))
        reconciled.start()
        reconciled.join(timeout=2)
        assert reconciled.is_alive()  # held back while the other process is between its two writes
        hold.unlink()
        _, errors = writer.communicate(timeout=300)
        assert writer.returncode == 0, errors
        reconciled.join(timeout=60)
        assert not reconciled.is_alive()
        assert str(secret) in documents.manifest.files(COLLECTION)
        assert documents.store.chunks_of(info.store_name, info.embedder, str(secret))
        assert secret_passages(documents)
    finally:
        documents.close()
