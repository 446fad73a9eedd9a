"""Collections on a real Chroma server (`chroma run` on loopback, started here) beside the data folder's, by one
setting (rag/server_collections.py, app/services/library/documents.py): new collections go to the server and are
searched there; the folder's stay and keep working, also while the server is down, whose collections then name it;
two Hearths pointed at the same server share its collections; `hearth ingest`, `collections` and
`ask` work from the terminal; and what this Hearth keeps about the server is its account's alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.answering.ask import AskFinished
from app.services.container import Services
from app.services.library.chroma_choice import ServerChoiceFile, choose
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from backends.base import GenerationParams, TextDelta
from rag.chroma_server import ChromaServerUnreachable, ServerCollectionGone
from rag.ingest import FileOutcome
from rag.manifest import CollectionError
from rag.retrieval.embeddings import Embedder
from rag.server_ledger import LEDGER, LISTED_S, SHARED_SUFFIX
from tests.chroma_servers import ChromaProcess, chroma_running, start_chroma
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
QUESTION = "When was the lighthouse built?"


@pytest.fixture
def chroma(tmp_path: Path) -> Iterator[ChromaProcess]:
    with chroma_running(tmp_path / "chroma-data") as running:
        yield running


def _documents(home: Path, embedder: Embedder, url: str | None) -> DocumentServices:
    settings = load_settings(home=home, rag={"chroma_url": url})
    return build_documents(settings, ensure_data_dir(resolve_data_paths(home)), embedder)


def _first(documents: DocumentServices, collection: str) -> str:
    return documents.retriever.search(collection, QUESTION, top_k=1).passages[0].chunk.text


def _client(url: str) -> chromadb.ClientAPI:
    host, port = url.removeprefix("http://").split(":")
    return chromadb.HttpClient(host=host, port=int(port), settings=ChromaSettings(anonymized_telemetry=False))


def _on_server(url: str) -> list[str]:
    """The passages' collections on the server (not the ledger, rag/server_ledger.py)."""
    return sorted(c.name for c in _client(url).list_collections() if c.name != LEDGER)


def test_new_collections_go_to_the_server_and_the_folder_s_stay(
    chroma: ChromaProcess, tmp_path: Path, embedder: Embedder
) -> None:
    home = tmp_path / "home"
    before = _documents(home, embedder, None)
    try:
        list(before.ingestor.ingest([CORPUS], "notes"))
    finally:
        before.close()
    documents = _documents(home, embedder, chroma.url)
    try:
        list(documents.ingestor.ingest([CORPUS], "shared manuals"))
        listed = {info.name: info.server for info in documents.manifest.collections()}
        assert listed == {"notes": None, "shared manuals": chroma.url}
        on_server = documents.manifest.get("shared manuals").store_name
        assert _on_server(chroma.url) == [on_server]  # the folder's collection was not copied there
        assert "lighthouse" in _first(documents, "shared manuals").lower()
        assert _first(documents, "shared manuals") == _first(documents, "notes")  # the same passages, both places
        summary = next(s for s in documents.summaries() if s.info.name == "shared manuals")
        assert summary.indexed_files == len(list(CORPUS.iterdir())) and summary.chunks > 0
        with pytest.raises(CollectionError, match="already a collection called 'notes' in the data folder"):
            documents.manifest.create("Notes", embedder.name)
        list(documents.ingestor.ingest([CORPUS / "garden-guide.txt"], "notes"))  # an existing one: still the folder's
        assert _on_server(chroma.url) == [on_server]
        documents.delete_collection("shared manuals")
        assert _on_server(chroma.url) == []
        assert [info.name for info in documents.manifest.collections()] == ["notes"]
    finally:
        documents.close()


def test_while_the_server_is_down_the_folder_s_collections_work_and_the_server_s_name_it(
    tmp_path: Path, embedder: Embedder
) -> None:
    running = start_chroma(tmp_path / "chroma-data")
    home = tmp_path / "home"
    try:
        before = _documents(home, embedder, None)
        list(before.ingestor.ingest([CORPUS], "notes"))
        before.close()
        documents = _documents(home, embedder, running.url)
        try:
            list(documents.ingestor.ingest([CORPUS], "manuals"))
            expected = _first(documents, "manuals")
            running.stop()
            assert "lighthouse" in _first(documents, "notes").lower()
            with pytest.raises(ChromaServerUnreachable) as gone:
                documents.retriever.search("manuals", "a question never asked before", top_k=1)
            assert running.url in gone.value.message and "data folder work meanwhile" in gone.value.remedy
            assert {s.info.name for s in documents.summaries()} == {"notes", "manuals"}  # listed all the same
            running = start_chroma(tmp_path / "chroma-data", running.port)
            assert _first(documents, "manuals") == expected
        finally:
            documents.close()
    finally:
        running.stop()
    nowhere = _documents(home, embedder, "http://127.0.0.1:9")  # no server there from the start
    try:
        assert "lighthouse" in _first(nowhere, "notes").lower()
        list(nowhere.ingestor.ingest([CORPUS / "garden-guide.txt"], "notes"))  # the folder's: indexed as ever
        with pytest.raises(ChromaServerUnreachable) as absent:
            list(nowhere.ingestor.ingest([CORPUS / "garden-guide.txt"], "garden"))  # a new one: for the server
        assert "http://127.0.0.1:9 did not answer" in absent.value.message
    finally:
        nowhere.close()


def test_two_hearths_share_a_collection_on_the_server_and_never_add_a_file_twice(
    chroma: ChromaProcess, tmp_path: Path, embedder: Embedder
) -> None:
    """Two data folders, as two computers would have: what one adds, the other lists, searches and does not add again;
    what the other adds or removes, the first sees; a file with the same content under another path (another
    computer's copy) is not added again; a collection deleted by one is gone for both."""
    mine = _documents(tmp_path / "mine", embedder, chroma.url)
    theirs = _documents(tmp_path / "theirs", embedder, chroma.url)
    mine_only, copy = tmp_path / "on my computer", tmp_path / "their copy"
    for folder in (mine_only, copy):
        folder.mkdir()
        shutil.copy(CORPUS / "garden-guide.txt", folder / "garden-guide.txt")
    try:
        first = [str(CORPUS / "lighthouse-history.md"), str(mine_only / "garden-guide.txt")]
        list(mine.ingestor.ingest([Path(path) for path in first], "manuals"))
        shutil.rmtree(mine_only)  # from here on a path of another computer, as the other Hearth sees it
        info = mine.manifest.get("manuals")
        count = mine.store.count(info.store_name, info.embedder)
        assert {i.name: i.server for i in theirs.manifest.collections()} == {"manuals": chroma.url}
        assert set(theirs.manifest.files("manuals")) == set(first)
        assert "lighthouse" in _first(theirs, "manuals").lower()  # found by the other, searched there
        outcomes = [e for e in theirs.ingestor.ingest([CORPUS], "manuals") if isinstance(e, FileOutcome)]
        assert {e.path for e in outcomes if e.outcome == "unchanged"} == {first[0]}
        twins = [e for e in theirs.ingestor.ingest([copy], "manuals") if isinstance(e, FileOutcome)]
        for twin in (*twins, next(e for e in outcomes if e.path.endswith("garden-guide.txt"))):
            assert (twin.outcome, twin.reason) == (
                "skipped",
                "same content as garden-guide.txt, already in this collection",
            )
        total = mine.store.count(info.store_name, info.embedder)
        assert total > count and total == mine.manifest.indexed_chunks("manuals")  # the others' files, once each
        assert set(mine.manifest.files("manuals")) == set(theirs.manifest.files("manuals"))
        theirs.ingestor.remove_file("manuals", str(CORPUS / "lighthouse-history.md"))
        assert str(CORPUS / "lighthouse-history.md") not in mine.manifest.files("manuals")
        assert all(
            "lighthouse" not in p.chunk.text.lower() for p in mine.retriever.search("manuals", QUESTION).passages
        )
        theirs.delete_collection("manuals")
        time.sleep(LISTED_S)  # the list of collections another Hearth read is taken as it was for that long
        assert mine.manifest.find("manuals") is None and _on_server(chroma.url) == []
    finally:
        mine.close()
        theirs.close()


def test_a_collection_made_before_the_ledger_is_copied_into_it_once_and_shared(
    chroma: ChromaProcess, tmp_path: Path, embedder: Embedder
) -> None:
    """A Hearth from before the ledger kept its server collections' records in its data folder only: the first time
    it reaches the server they are copied into the ledger, and another Hearth then finds them."""
    home = tmp_path / "older"
    documents = _documents(home, embedder, chroma.url)
    try:
        list(documents.ingestor.ingest([CORPUS], "manuals"))
        kept = documents.manifest.files("manuals")
    finally:
        documents.close()
    _client(chroma.url).delete_collection(LEDGER)  # as that Hearth left the server: passages, no ledger
    folder = resolve_data_paths(home).chroma_servers_dir
    for marker in folder.glob(f"*{SHARED_SUFFIX}"):
        marker.unlink()
    older = _documents(home, embedder, chroma.url)
    other = _documents(tmp_path / "other", embedder, chroma.url)
    try:
        assert "lighthouse" in _first(older, "manuals").lower()
        assert other.manifest.files("manuals") == kept  # copied to the server, whole
        assert "lighthouse" in _first(other, "manuals").lower()
        other.delete_collection("manuals")
        older.close()
        older = _documents(home, embedder, chroma.url)
        assert older.manifest.find("manuals") is None  # copied once: deleted on the server, it stays deleted
    finally:
        older.close()
        other.close()


def test_a_server_chosen_on_the_page_is_used_and_the_settings_win(
    chroma: ChromaProcess, tmp_path: Path, embedder: Embedder
) -> None:
    home = tmp_path / "home"
    chosen = ensure_data_dir(resolve_data_paths(home)).chroma_server_file
    with pytest.raises(ChromaServerUnreachable):
        choose(chosen, "http://127.0.0.1:9")  # nothing answers there: checked, and not kept
    assert not chosen.exists()
    choose(chosen, chroma.url)
    documents = _documents(home, embedder, None)  # no setting names a server: the page's choice is used
    try:
        list(documents.ingestor.ingest([CORPUS / "garden-guide.txt"], "garden"))
        assert documents.manifest.get("garden").server == chroma.url
    finally:
        documents.close()
    running = start_chroma(tmp_path / "other-chroma")
    try:
        documents = _documents(home, embedder, running.url)  # the setting wins over the page's choice
        try:
            list(documents.ingestor.ingest([CORPUS / "garden-guide.txt"], "more garden"))
            assert documents.manifest.get("more garden").server == running.url
        finally:
            documents.close()
    finally:
        running.stop()
    ServerChoiceFile(chosen).clear()
    documents = _documents(home, embedder, None)
    try:
        list(documents.ingestor.ingest([CORPUS / "garden-guide.txt"], "local garden"))
        assert documents.manifest.get("local garden").server is None
    finally:
        documents.close()


def test_a_collection_deleted_on_the_server_is_named_not_made_again_empty(
    chroma: ChromaProcess, tmp_path: Path, embedder: Embedder
) -> None:
    documents = _documents(tmp_path / "home", embedder, chroma.url)
    try:
        list(documents.ingestor.ingest([CORPUS], "manuals"))
        documents.manifest.create("empty shelf", embedder.name)  # nothing added yet: read as empty, as ever
        assert documents.retriever.search("empty shelf", QUESTION, top_k=1).passages == []
        assert "lighthouse" in _first(documents, "manuals").lower()
        store_name = documents.manifest.get("manuals").store_name
        _client(chroma.url).delete_collection(store_name)  # by hand on the server, or by another program
        with pytest.raises(ServerCollectionGone) as gone:
            documents.retriever.search("manuals", "a question never asked before", top_k=1)
        assert "'manuals' is no longer on the Chroma server " + chroma.url in gone.value.message
        assert 'hearth collections "manuals" --delete' in gone.value.remedy
        assert store_name not in _on_server(chroma.url)  # not made again, empty, by the search
        documents.delete_collection("manuals")  # the remedy works on what is left
        list(documents.ingestor.ingest([CORPUS], "manuals"))
        assert "lighthouse" in _first(documents, "manuals").lower()
    finally:
        documents.close()


def test_an_ingest_cut_off_by_the_server_names_it_and_resumes_without_duplicates(
    tmp_path: Path, embedder: Embedder
) -> None:
    from rag.ingest import FileOutcome

    running = start_chroma(tmp_path / "chroma-data")
    documents = _documents(tmp_path / "home", embedder, running.url)
    try:
        written: list[str] = []
        with pytest.raises(ChromaServerUnreachable) as cut:
            for event in documents.ingestor.ingest([CORPUS], "manuals"):
                if isinstance(event, FileOutcome) and event.outcome == "indexed":
                    written.append(event.path)
                    running.stop()  # one file is on the server; the others, embedded with it, are still to write
        assert running.url in cut.value.message
        assert 0 < len(written) < len(list(CORPUS.iterdir()))
        running = start_chroma(tmp_path / "chroma-data", running.port)
        outcomes = [e for e in documents.ingestor.ingest([CORPUS], "manuals") if isinstance(e, FileOutcome)]
        assert {e.path for e in outcomes if e.outcome == "unchanged"} == set(written)  # not added twice
        info = documents.manifest.get("manuals")
        by_path = documents.store.chunk_ids_by_path(info.store_name, info.embedder)
        ids = [chunk_id for chunk_ids in by_path.values() for chunk_id in chunk_ids]
        assert len(ids) == len(set(ids)) == documents.manifest.indexed_chunks("manuals")
        indexed = {path for path, record in documents.manifest.files("manuals").items() if record.status == "indexed"}
        assert set(by_path) == indexed  # no passage of a half-added file, none missing
    finally:
        documents.close()
        running.stop()


def test_a_server_gone_mid_answer_lets_the_answer_finish_and_names_itself_next(
    tmp_path: Path, embedder: Embedder, chat: Services
) -> None:
    from app.services.answering.ask import AskStarted, ask

    running = start_chroma(tmp_path / "chroma-data")
    home = tmp_path / "home"
    before = _documents(home, embedder, None)
    try:
        list(before.ingestor.ingest([CORPUS / "lighthouse-history.md"], "notes"))
    finally:
        before.close()
    documents = _documents(home, embedder, running.url)
    try:
        list(documents.ingestor.ingest([CORPUS], "manuals"))
        params = GenerationParams(0.0, 24)
        events = ask(documents, chat.runtime, "manuals", QUESTION, params)
        assert isinstance(next(events), AskStarted)  # the passages are found: now the server goes
        running.stop()
        rest = list(events)
        assert isinstance(rest[-1], AskFinished) and "".join(e.text for e in rest if isinstance(e, TextDelta))
        with pytest.raises(ChromaServerUnreachable) as gone:
            list(ask(documents, chat.runtime, "manuals", "Who kept the light?", params))
        assert running.url in gone.value.message
        kept = list(ask(documents, chat.runtime, "notes", QUESTION, params))  # the data folder's: as ever
        assert isinstance(kept[-1], AskFinished)
    finally:
        documents.close()
        running.stop()


def test_a_collection_is_copied_to_the_server_and_back_as_it_is(
    chroma: ChromaProcess, tmp_path: Path, embedder: Embedder
) -> None:
    home = tmp_path / "home"
    alone = _documents(home, embedder, None)
    try:
        list(alone.ingestor.ingest([CORPUS], "notes"))
        with pytest.raises(CollectionError) as nowhere:
            alone.copy_collection("notes", to_server=True)
        assert "HEARTH_RAG__CHROMA_URL" in nowhere.value.remedy
        expected = alone.retriever.search("notes", QUESTION, top_k=3).passages
    finally:
        alone.close()
    documents = _documents(home, embedder, chroma.url)
    try:
        here = documents.manifest.get("notes")
        count = documents.store.count(here.store_name, here.embedder)
        seen: list[tuple[int, int]] = []
        there = documents.copy_collection(
            "notes", to_server=True, copied=lambda done, total: seen.append((done, total))
        )
        assert there.server == chroma.url and seen[-1] == (count, count)
        assert documents.store.count(there.store_name, there.embedder) == count
        assert [(c.name, c.server) for c in documents.manifest.collections()] == [
            ("notes", None),
            ("notes", chroma.url),
        ]
        with pytest.raises(CollectionError, match="already a collection called 'notes' on the Chroma server"):
            documents.copy_collection("notes", to_server=True)
        documents.delete_collection("notes")  # the data folder's, which was the one used
        assert documents.manifest.get("notes").server == chroma.url
        found = documents.retriever.search("notes", QUESTION, top_k=3).passages
        assert [p.chunk.text for p in found] == [p.chunk.text for p in expected]  # nothing read or embedded again
        assert {r.path for r in documents.files("notes")} == {str(p) for p in CORPUS.iterdir()}
        list(documents.ingestor.ingest([CORPUS], "notes"))  # the files' records came along: nothing to do
        assert documents.store.count(there.store_name, there.embedder) == count
        back = documents.copy_collection("notes", to_server=False)
        assert back.server is None and documents.manifest.get("notes").server is None
        assert [p.chunk.text for p in documents.retriever.search("notes", QUESTION, top_k=3).passages] == [
            p.chunk.text for p in expected
        ]
    finally:
        documents.close()


def test_the_terminal_commands_use_the_server(chroma: ChromaProcess, tmp_path: Path) -> None:
    env = os.environ | {"HEARTH_HOME": str(tmp_path / "home"), "HEARTH_RAG__CHROMA_URL": chroma.url}

    def hearth(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env, timeout=600, check=False
        )

    added = hearth("ingest", str(CORPUS), "-c", "manuals")
    assert added.returncode == 0, added.stderr[-2000:]
    listed = hearth("collections")
    assert listed.returncode == 0 and f"on the Chroma server {chroma.url}" in listed.stdout, listed.stdout
    asked = hearth("ask", QUESTION, "-c", "manuals")
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert "lighthouse-history.md" in asked.stdout
    assert len(_on_server(chroma.url)) == 1
    copied = hearth("collections", "manuals", "--copy-to-folder")
    assert copied.returncode == 0, copied.stderr[-2000:]
    assert "into the data folder" in copied.stdout and "copied 14 of 14 passages" in copied.stderr
    listed = hearth("collections")
    assert listed.stdout.count("manuals:") == 2, listed.stdout


def test_what_this_hearth_keeps_about_the_server_is_its_own(
    chroma: ChromaProcess, tmp_path: Path, embedder: Embedder, other_account: tuple[int, int]
) -> None:
    opened = Path(tempfile.mkdtemp(prefix="hearth-open-", dir="/tmp"))  # under a folder others may enter
    home = opened / "home"
    try:
        documents = _documents(home, embedder, chroma.url)
        try:
            list(documents.ingestor.ingest([CORPUS / "garden-guide.txt"], "garden"))
        finally:
            documents.close()
        chosen = resolve_data_paths(home).chroma_server_file
        choose(chosen, chroma.url)  # as the page keeps it
        folder = resolve_data_paths(home).chroma_servers_dir
        mirror = next(folder.glob("*.db"))  # the mirror of the server's ledger
        assert folder.stat().st_mode & 0o777 == 0o700 and mirror.with_name(mirror.name + SHARED_SUFFIX).exists()
        for open_to_all in (opened, home):  # as if an older Hearth had left the data folder open
            open_to_all.chmod(0o755)
        assert as_other(other_account, "/usr/bin/ls", str(home)).returncode == 0
        assert as_other(other_account, "/usr/bin/ls", str(folder)).returncode != 0  # the refusal is its own
        read = as_other(other_account, "/usr/bin/head", "-c", "8", str(mirror))
        assert read.returncode != 0 and "Permission denied" in read.stderr
        read = as_other(other_account, "/usr/bin/head", "-c", "8", str(chosen))  # it names the token's file
        assert read.returncode != 0 and "Permission denied" in read.stderr
    finally:
        shutil.rmtree(opened, ignore_errors=True)
