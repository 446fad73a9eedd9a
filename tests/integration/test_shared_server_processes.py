"""Two Hearth processes, each with its own data folder as two computers would have, on one real Chroma server
(`chroma run` on loopback, started here) and one collection: one killed in the middle of adding a
folder, then the other adding the same folder; and both adding it at once. Either way every file ends indexed once,
no passage is doubled and none is left without its file's record; and a file's passages written without their record
(what a kill between the two leaves) stay out of the other Hearth's searches and are not doubled by its next add."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from models.gguf import sha256_of
from rag.chunking import chunk_sections
from rag.ingest import FileOutcome
from rag.reading.sections import Section
from rag.retrieval.embeddings import Embedder
from rag.server_ledger import LEDGER
from tests.chroma_servers import ChromaProcess, chroma_running

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
FILES = 24


@pytest.fixture
def chroma(tmp_path: Path) -> Iterator[ChromaProcess]:
    with chroma_running(tmp_path / "chroma-data") as running:
        yield running


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``FILES`` text files, each with content of its own (no two are the same file)."""
    made = tmp_path / "shared manuals"
    made.mkdir()
    text = (CORPUS / "garden-guide.txt").read_text(encoding="utf-8")
    for number in range(FILES):
        (made / f"guide-{number:02d}.txt").write_text(f"Edition {number} of the guide.\n\n{text}", encoding="utf-8")
    return made


def _hearth(home: Path, url: str, *args: str) -> subprocess.Popen[str]:
    env = os.environ | {"HEARTH_HOME": str(home), "HEARTH_RAG__CHROMA_URL": url}
    return subprocess.Popen(
        [sys.executable, "-m", "app", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _finished(process: subprocess.Popen[str]) -> None:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, (out[-2000:], err[-2000:])


def _documents(home: Path, embedder: Embedder, url: str) -> DocumentServices:
    settings = load_settings(home=home, rag={"chroma_url": url})
    return build_documents(settings, ensure_data_dir(resolve_data_paths(home)), embedder)


def _file_rows(url: str) -> Callable[[], int]:
    """How many files the server's ledger records, asked of one client (made once: polling stays quick)."""
    host, port = url.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port), settings=ChromaSettings(anonymized_telemetry=False))

    def count() -> int:
        try:
            return len(client.get_collection(LEDGER).get(where={"kind": "file"}, include=[])["ids"])
        except Exception:  # the ledger is made with the collection's first file: not there yet
            return 0

    return count


def _assert_whole(documents: DocumentServices, folder: Path) -> None:
    """Every file of ``folder`` indexed once; each passage once, and each owned by a recorded file."""
    records = documents.manifest.files("manuals")
    assert set(records) == {str(path) for path in folder.iterdir()}
    assert all(record.status == "indexed" and record.chunks > 0 for record in records.values())
    info = documents.manifest.get("manuals")
    by_path = documents.store.chunk_ids_by_path(info.store_name, info.embedder)
    ids = [chunk_id for chunk_ids in by_path.values() for chunk_id in chunk_ids]
    assert len(ids) == len(set(ids)) == documents.manifest.indexed_chunks("manuals")
    assert set(by_path) == set(records)


def test_one_hearth_killed_mid_add_and_another_adding_the_same_folder_leave_each_file_once(
    chroma: ChromaProcess, tmp_path: Path, folder: Path, embedder: Embedder
) -> None:
    first = _hearth(tmp_path / "first", chroma.url, "ingest", str(folder), "-c", "manuals")
    recorded_files = _file_rows(chroma.url)
    deadline = time.monotonic() + 300
    while recorded_files() == 0 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)  # wherever it is: between files, embedding, or between passages and record
    first.communicate(timeout=60)
    recorded = recorded_files()
    assert 0 < recorded < FILES, f"{recorded} files recorded: the kill came too late to cut the add short"
    _finished(_hearth(tmp_path / "second", chroma.url, "ingest", str(folder), "-c", "manuals"))
    second = _documents(tmp_path / "second", embedder, chroma.url)
    again = _documents(tmp_path / "first", embedder, chroma.url)
    try:
        _assert_whole(second, folder)
        outcomes = [e for e in again.ingestor.ingest([folder], "manuals") if isinstance(e, FileOutcome)]
        assert [e.outcome for e in outcomes] == ["unchanged"] * FILES  # the killed one, restarted: nothing to add
        _assert_whole(again, folder)
    finally:
        second.close()
        again.close()


def test_two_hearths_adding_the_same_folder_at_once_leave_each_file_once(
    chroma: ChromaProcess, tmp_path: Path, folder: Path, embedder: Embedder
) -> None:
    both = [_hearth(tmp_path / home, chroma.url, "ingest", str(folder), "-c", "manuals") for home in ("a", "b")]
    for process in both:
        _finished(process)
    documents = _documents(tmp_path / "a", embedder, chroma.url)
    try:
        _assert_whole(documents, folder)
        assert documents.retriever.search("manuals", "When should tomatoes be planted?", top_k=3).passages
    finally:
        documents.close()


def test_passages_written_without_their_record_stay_out_of_search_and_are_not_doubled(
    chroma: ChromaProcess, tmp_path: Path, folder: Path, embedder: Embedder
) -> None:
    writer = _documents(tmp_path / "writer", embedder, chroma.url)
    reader = _documents(tmp_path / "reader", embedder, chroma.url)
    try:
        list(writer.ingestor.ingest([folder / "guide-00.txt"], "manuals"))
        info = writer.manifest.get("manuals")
        # What a Hearth killed between writing a file's passages and its record leaves: the passages alone.
        half = folder / "half-added.txt"
        half.write_text("The lighthouse keeper's log records a storm in 1887 that broke the lantern glass.\n")
        sha = sha256_of(half)  # as the Hearth adding it would: the passages' ids come from the content
        chunks = chunk_sections([Section(half.read_text(), None, None)], embedder.tokenizer(), sha, embedder.max_tokens)
        vectors = embedder.embed([chunk.text for chunk in chunks])
        writer.store.replace_file(info.store_name, info.embedder, str(half), chunks, vectors)
        found = reader.retriever.search("manuals", "When did a storm break the lantern glass?", top_k=5).passages
        assert found and all(p.chunk.path != str(half) for p in found)  # not part of the collection yet
        outcomes = [e for e in reader.ingestor.ingest([half], "manuals") if isinstance(e, FileOutcome)]
        assert [e.outcome for e in outcomes] == ["indexed"]
        by_path = reader.store.chunk_ids_by_path(info.store_name, info.embedder)
        assert len(by_path[str(half)]) == reader.manifest.files("manuals")[str(half)].chunks  # written once
        found = reader.retriever.search("manuals", "When did a storm break the lantern glass?", top_k=1).passages
        assert found[0].chunk.path == str(half)
    finally:
        writer.close()
        reader.close()
