"""Real files generated here, read by the real reader process, embedded by MiniLM and searched in Chroma: a CSV row
is found by its value, codes by keyword, and Word and PDF headings name the passages."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from backends.base import CancelToken
from rag.reading.reader import ReaderProcess
from rag.retrieval.embeddings import Embedder
from tests.helpers import write_bookmarked_pdf

pytestmark = pytest.mark.integration

UBUNTU = [
    ("4.10", "Warty Warthog", "2004-10-20"),
    ("5.04", "Hoary Hedgehog", "2005-04-08"),
    ("5.10", "Breezy Badger", "2005-10-12"),
    ("6.06 LTS", "Dapper Drake", "2006-06-01"),
    ("6.10", "Edgy Eft", "2006-10-26"),
    ("7.04", "Feisty Fawn", "2007-04-19"),
    ("7.10", "Gutsy Gibbon", "2007-10-18"),
    ("8.04 LTS", "Hardy Heron", "2008-04-24"),
    ("8.10", "Intrepid Ibex", "2008-10-30"),
    ("9.04", "Jaunty Jackalope", "2009-04-23"),
    ("9.10", "Karmic Koala", "2009-10-29"),
    ("10.04 LTS", "Lucid Lynx", "2010-04-29"),
    ("10.10", "Maverick Meerkat", "2010-10-10"),
    ("11.04", "Natty Narwhal", "2011-04-28"),
    ("11.10", "Oneiric Ocelot", "2011-10-13"),
    ("12.04 LTS", "Precise Pangolin", "2012-04-26"),
    ("14.04 LTS", "Trusty Tahr", "2014-04-17"),
    ("16.04 LTS", "Xenial Xerus", "2016-04-21"),
    ("18.04 LTS", "Bionic Beaver", "2018-04-26"),
]
DEBIAN = [
    ("1.1", "Buzz", "1996-06-17"),
    ("1.2", "Rex", "1996-12-12"),
    ("1.3", "Bo", "1997-06-05"),
    ("2.0", "Hamm", "1998-07-24"),
    ("3.0", "Woody", "2002-07-19"),
    ("4.0", "Etch", "2007-04-08"),
    ("5.0", "Lenny", "2009-02-14"),
    ("6.0", "Squeeze", "2011-02-06"),
    ("7", "Wheezy", "2013-05-04"),
    ("8", "Jessie", "2015-04-26"),
    ("9", "Stretch", "2017-06-17"),
    ("10", "Buster", "2019-07-06"),
]
NOTES = {
    "bikes.txt": "Replacement chain part XR-7742 fits all eleven-speed road bikes sold after 2019.",
    "chains.txt": "Chain part XR-7741 fits ten-speed bikes; measure chain wear every 2,000 km.",
    "install.md": "# Installing\n\nRun `pip install --no-deps wheelhouse/*` to install without dependencies.\n",
    "deps.md": "# Dependencies\n\nPip installs the dependencies of each package unless told otherwise.\n",
    "files.txt": "Open the log with os.open(path, os.O_RDONLY) so that it is never written to.",
    "json.txt": "json.dumps(obj, *, skipkeys=False) serializes obj; with skipkeys, non-string keys are skipped.",
    "hashes.txt": "Pin each download with a SHA-256 hash so that a changed file is refused.",
    "training.txt": "The learning rate 1e-5 suited the small model; 1e-4 made the loss diverge.",
}


def release_table(rows: list[tuple[str, str, str]]) -> str:
    lines = ["version,codename,series,release"]
    lines += [f"{version},{codename},{codename.split()[0].lower()},{release}" for version, codename, release in rows]
    return "\n".join(lines) + "\n"


@pytest.fixture
def documents(isolated_home: Path, tmp_path: Path, embedder: Embedder) -> Iterator[DocumentServices]:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ubuntu.csv").write_text(release_table(UBUNTU))
    (folder / "debian.csv").write_text(release_table(DEBIAN))
    for name, text in NOTES.items():
        (folder / name).write_text(text)
    settings = load_settings()
    paths = resolve_data_paths(settings.home)
    paths.root.mkdir(parents=True, exist_ok=True)
    services = build_documents(settings, paths, embedder)
    list(services.ingestor.ingest([folder], "exact"))
    yield services
    services.close()


def test_a_csv_row_is_found_by_its_value_with_its_columns(documents: DocumentServices) -> None:
    passages = documents.retriever.search("exact", "What is the codename of Ubuntu 6.06 LTS?", top_k=5).passages
    top = passages[0].chunk
    assert Path(top.path).name == "ubuntu.csv"
    assert top.text == "version: 6.06 LTS; codename: Dapper Drake; series: dapper; release: 2006-06-01"
    assert top.section == "version: 6.06 LTS"


@pytest.mark.parametrize(
    ("question", "gold"),
    [
        ("Which bikes does XR-7742 fit?", "bikes.txt"),
        ("What does --no-deps do?", "install.md"),
        ("When is O_RDONLY used?", "files.txt"),
        ("What does skipkeys do in json.dumps?", "json.txt"),
        ("Which hash pins a download, SHA-256?", "hashes.txt"),
        ("Which learning rate, 1e-5 or another?", "training.txt"),
    ],
)
def test_codes_and_identifiers_find_their_passage_first(documents: DocumentServices, question: str, gold: str) -> None:
    top = documents.retriever.search("exact", question, top_k=3).passages[0]
    assert Path(top.chunk.path).name == gold


def _docx_with_headings(path: Path) -> Path:
    """A Word document whose headings use a localized style id ("berschrift1") named "heading 1", as German Word
    writes them, and a style based on it."""
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    styles = (
        f'<?xml version="1.0" encoding="UTF-8"?><w:styles {w}>'
        '<w:style w:type="paragraph" w:styleId="Standard"><w:name w:val="Normal"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="Kapitel"><w:name w:val="Kapitel"/><w:basedOn w:val="berschrift1"/>'
        "</w:style>"
        '<w:style w:type="paragraph" w:styleId="berschrift2"><w:name w:val="heading 2"/></w:style>'
        "</w:styles>"
    )

    def paragraph(text: str, style: str | None = None) -> str:
        props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
        return f"<w:p>{props}<w:r><w:t>{text}</w:t></w:r></w:p>"

    body = "".join(
        [
            paragraph("Harbour handbook"),
            paragraph("Moorings", "berschrift1"),
            paragraph("Boats pay a mooring fee of 14 euros a night."),
            paragraph("Winter berths", "berschrift2"),
            paragraph("Winter berths must be booked at least 14 days ahead."),
            paragraph("Safety¶", "Kapitel"),
            paragraph("Life jackets hang by the harbour office."),
        ]
    )
    document = f'<?xml version="1.0" encoding="UTF-8"?><w:document {w}><w:body>{body}</w:body></w:document>'
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("word/document.xml", document)
        archive.writestr("word/styles.xml", styles)
    return path


def test_word_headings_become_sections_not_text(tmp_path: Path) -> None:
    reader = ReaderProcess()
    try:
        sections = reader.read(_docx_with_headings(tmp_path / "harbour.docx"), CancelToken())
    finally:
        reader.close()
    assert [(s.section, s.text) for s in sections] == [
        (None, "Harbour handbook"),
        ("Moorings", "Moorings\n\nBoats pay a mooring fee of 14 euros a night."),
        ("Moorings › Winter berths", "Winter berths\n\nWinter berths must be booked at least 14 days ahead."),
        ("Safety", "Safety\n\nLife jackets hang by the harbour office."),
    ]


def test_pdf_passages_keep_one_page_and_their_bookmark_path(
    documents: DocumentServices, tmp_path: Path, embedder: Embedder
) -> None:
    folder = tmp_path / "manual"
    folder.mkdir()
    write_bookmarked_pdf(folder / "manual.pdf")
    list(documents.ingestor.ingest([folder], "manual"))
    info = documents.manifest.get("manual")
    chunks = documents.store.chunks_of(info.store_name, info.embedder, str((folder / "manual.pdf").resolve()))
    assert [(c.page, c.section) for c in chunks] == [(1, None), (2, "Care › Lamps"), (3, "Care › Lamps")]
    assert all(embedder.count_tokens(c.text) <= embedder.max_tokens for c in chunks)
