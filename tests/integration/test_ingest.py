"""Ingestion with the real loaders, the real MiniLM embedder and a real Chroma store in a temp folder."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from rag.ingest import FileOutcome, IngestEvent
from rag.manifest import CollectionError
from rag.retrieval.embeddings import Embedder
from tests.helpers import write_docx, write_pdf

pytestmark = pytest.mark.integration

LONG_PARAGRAPH = (
    "The keeper climbed the spiral stairs every evening to light the lamp. "
    "Ships far out at sea watched for its flash, counted the seconds between beams, and knew where they were. "
) * 30


@pytest.fixture
def documents(isolated_home: Path, embedder: Embedder) -> Iterator[DocumentServices]:
    settings = load_settings(rag={"max_file_mb": 1})
    paths = resolve_data_paths(settings.home)
    paths.root.mkdir(parents=True, exist_ok=True)
    services = build_documents(settings, paths, embedder)
    yield services
    services.close()


def outcomes(events: Iterator[IngestEvent]) -> dict[str, FileOutcome]:
    return {Path(e.path).name: e for e in events if isinstance(e, FileOutcome)}


def corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_pdf(folder / "lighthouses.pdf", ["Lighthouses guide ships at night.", "Fresnel lenses focus the beam."])
    write_docx(folder / "harbour.docx", ["The harbour master keeps the tide tables.", "Boats pay a mooring fee."])
    (folder / "tides.md").write_text(
        "# Tides\n\nThe moon pulls the sea.\n\n## Spring tides\n\nThey follow full moons.\n"
    )
    (folder / "owls.html").write_text(
        "<html><head><title>Owls</title></head><body><h1>Owls</h1><p>Owls hunt at night.</p></body></html>"
    )
    (folder / "fleet.csv").write_text("boat,length\nAurora,12 m\nBreeze,9 m\n")
    (folder / "menu.txt").write_bytes("Crème brûlée à la carte, très bon. Le café est à côté.".encode("cp1252"))
    (folder / "keeper.txt").write_text(LONG_PARAGRAPH)
    return folder


def test_every_supported_type_is_indexed_with_its_place(documents: DocumentServices, tmp_path: Path) -> None:
    folder = corpus(tmp_path / "docs")
    result = outcomes(documents.ingestor.ingest([folder], "Harbour notes"))
    assert {name: o.outcome for name, o in result.items()} == {
        "fleet.csv": "indexed",
        "harbour.docx": "indexed",
        "keeper.txt": "indexed",
        "lighthouses.pdf": "indexed",
        "menu.txt": "indexed",
        "owls.html": "indexed",
        "tides.md": "indexed",
    }
    info = documents.manifest.get("Harbour notes")

    def chunks(name: str) -> list:  # type: ignore[type-arg]
        return documents.store.chunks_of(info.store_name, info.embedder, str((folder / name).resolve()))

    assert [(c.page, c.text) for c in chunks("lighthouses.pdf")] == [
        (1, "Lighthouses guide ships at night."),
        (2, "Fresnel lenses focus the beam."),
    ]
    assert [c.section for c in chunks("tides.md")] == ["Tides", "Tides › Spring tides"]
    assert [c.section for c in chunks("fleet.csv")] == ["boat: Aurora", "boat: Breeze"]
    assert chunks("fleet.csv")[0].text == "boat: Aurora; length: 12 m"
    assert chunks("owls.html")[0].section == "Owls"
    assert "Owls hunt at night." in chunks("owls.html")[0].text
    assert "Crème brûlée à la carte" in chunks("menu.txt")[0].text
    assert "harbour master" in chunks("harbour.docx")[0].text
    long = chunks("keeper.txt")
    assert len(long) > 3
    assert all(documents.embedder.count_tokens(c.text) <= documents.embedder.max_tokens for c in long)
    assert documents.store.count(info.store_name, info.embedder) == sum(
        f.chunks for f in documents.files("Harbour notes")
    )


def test_bad_files_are_skipped_with_reasons_and_the_rest_continue(documents: DocumentServices, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    write_pdf(folder / "good.pdf", ["A fine page about boats."])
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\n" + b"garbage " * 200)
    from pypdf import PdfWriter

    locked = PdfWriter(clone_from=str(write_pdf(tmp_path / "plain.pdf", ["secret plans"])))
    locked.encrypt("pw")
    locked.write(str(folder / "locked.pdf"))
    (folder / "empty.txt").write_text("")
    (folder / "blob.txt").write_bytes(os.urandom(4000))
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(100))
    (folder / "huge.txt").write_text("word " * 300_000)  # 1.5 MB, over the 1 MB limit of this test
    (folder / "copy.pdf").write_bytes((folder / "good.pdf").read_bytes())
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    (folder / "escape.txt").symlink_to(secret)
    result = outcomes(documents.ingestor.ingest([folder], "Mixed bag"))
    reasons = {name: o.reason for name, o in result.items() if o.outcome == "skipped"}
    assert result["copy.pdf"].outcome == "indexed"  # folders are read in name order: copy.pdf comes first
    assert reasons["good.pdf"] == "same content as copy.pdf, already in this collection"
    assert "damaged" in reasons["broken.pdf"]
    assert "encrypted" in reasons["locked.pdf"]
    assert "empty" in reasons["empty.txt"]
    assert "binary" in reasons["blob.txt"]
    assert ".png is not supported" in reasons["photo.png"]
    assert "larger than the 1 MB limit" in reasons["huge.txt"]
    assert "links outside" in reasons["escape.txt"]
    summary = documents.summaries()[0]
    assert (summary.indexed_files, summary.skipped_files) == (1, 8)


def test_rerunning_only_touches_what_changed(documents: DocumentServices, tmp_path: Path) -> None:
    folder = corpus(tmp_path / "docs")
    first = outcomes(documents.ingestor.ingest([folder], "kb"))
    assert all(o.outcome == "indexed" for o in first.values())
    again = outcomes(documents.ingestor.ingest([folder], "kb"))
    assert {o.outcome for o in again.values()} == {"unchanged"}

    (folder / "tides.md").write_text("# Tides\n\nNeap tides come with half moons.\n")
    (folder / "owls.html").unlink()
    (folder / "new.txt").write_text("A new note about buoys.")
    os.utime(folder / "fleet.csv")  # touched, same content
    third = outcomes(documents.ingestor.ingest([folder], "kb"))
    assert third["tides.md"].outcome == "indexed" and third["tides.md"].chunks == 1
    assert third["owls.html"].outcome == "removed"
    assert third["new.txt"].outcome == "indexed"
    assert third["fleet.csv"].outcome == "unchanged"
    assert third["keeper.txt"].outcome == "unchanged"

    info = documents.manifest.get("kb")
    files = documents.files("kb")
    assert documents.store.count(info.store_name, info.embedder) == sum(f.chunks for f in files)
    assert not any(f.path.endswith("owls.html") for f in files)
    tides = documents.store.chunks_of(info.store_name, info.embedder, str((folder / "tides.md").resolve()))
    assert len(tides) == 1
    assert "Neap tides come with half moons." in tides[0].text


def test_files_indexed_by_an_older_way_of_making_passages_are_read_again(
    documents: DocumentServices, tmp_path: Path
) -> None:
    """An index made before passages got their sections is rebuilt by the next run, file by file, although no
    file changed; after that the files are unchanged again and the store matches the manifest."""
    folder = corpus(tmp_path / "docs")
    list(documents.ingestor.ingest([folder], "kb"))
    with sqlite3.connect(documents.manifest._database.path) as db:  # what a manifest from before format 2 holds
        db.execute("UPDATE files SET passage_format = 1 WHERE path LIKE ?", ("%fleet.csv",))
    again = outcomes(documents.ingestor.ingest([folder], "kb"))
    assert again["fleet.csv"].outcome == "indexed"
    assert {o.outcome for name, o in again.items() if name != "fleet.csv"} == {"unchanged"}
    assert {o.outcome for o in outcomes(documents.ingestor.ingest([folder], "kb")).values()} == {"unchanged"}
    info = documents.manifest.get("kb")
    assert documents.store.count(info.store_name, info.embedder) == documents.manifest.indexed_chunks("kb")


def test_removing_a_file_and_deleting_a_collection(documents: DocumentServices, tmp_path: Path) -> None:
    folder = corpus(tmp_path / "docs")
    list(documents.ingestor.ingest([folder], "kb"))
    info = documents.manifest.get("kb")
    before = documents.store.count(info.store_name, info.embedder)
    documents.ingestor.remove_file("kb", str((folder / "keeper.txt").resolve()))
    assert documents.store.count(info.store_name, info.embedder) < before
    assert (folder / "keeper.txt").exists()
    documents.ingestor.delete_collection("kb")
    assert documents.summaries() == []
    with pytest.raises(CollectionError, match="no collection called"):
        documents.manifest.get("kb")
    assert (folder / "tides.md").exists()


def test_a_collection_created_empty_can_be_deleted(documents: DocumentServices) -> None:
    # The Documents tab's Create makes the record; the vector store has nothing until the first file.
    documents.ingestor.open_collection("Empty")
    documents.ingestor.delete_collection("empty")
    assert documents.manifest.find("Empty") is None


def test_a_collection_built_by_another_embedder_is_not_mixed(
    documents: DocumentServices, tmp_path: Path, embedder: Embedder
) -> None:
    documents.manifest.create("old", "some-other-model")
    with pytest.raises(CollectionError, match="cannot be mixed"):
        list(documents.ingestor.ingest([corpus(tmp_path / "docs")], "old"))


def test_a_bad_new_version_of_an_upload_keeps_the_earlier_one(documents: DocumentServices, tmp_path: Path) -> None:
    from app.services.library.uploads import add_uploads
    from backends.base import CancelToken

    browser = tmp_path / "browser"
    browser.mkdir()
    upload = browser / "notes.md"
    upload.write_text("# Tides\n\nSpring tides follow the full moon.\n")

    def add(cancel: CancelToken | None = None) -> list[FileOutcome]:
        events = add_uploads(documents, "uploads", [upload], cancel or CancelToken())
        return [e for e in events if isinstance(e, FileOutcome)]

    assert [o.outcome for o in add()] == ["indexed"]
    kept = documents.uploads_folder(documents.manifest.get("uploads")) / "notes.md"
    upload.write_bytes(b"")  # the user uploads a broken "new version"
    (outcome,) = add()
    assert outcome.outcome == "skipped"
    assert outcome.reason.endswith("the earlier version is kept")
    assert kept.read_text().startswith("# Tides")
    (record,) = documents.files("uploads")
    assert (record.status, record.chunks) == ("indexed", 1)
    top = documents.retriever.search("uploads", "spring tides full moon", top_k=1).passages[0]
    assert "full moon" in top.chunk.text

    upload.write_text("# Tides\n\nNeap tides come at the half moon.\n")
    cancelled = CancelToken()
    cancelled.cancel()
    assert add(cancelled) == []  # cancelled before it started: everything as it was
    assert kept.read_text().startswith("# Tides\n\nSpring")
    assert sorted(p.name for p in kept.parent.iterdir()) == ["notes.md"]

    assert [o.outcome for o in add()] == ["indexed"]
    assert "half moon" in kept.read_text()
    assert sorted(p.name for p in kept.parent.iterdir()) == ["notes.md"]
