"""Hostile documents, generated for real, read by the real reader process and by a real `hearth ingest`: each is
refused with its reason, within bounded memory, and neither Cancel nor the next file is held up by one."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from app.services.library.documents import DocumentServices
from backends.base import CancelToken
from rag.ingest import FileOutcome, IngestProgress
from rag.reading.limits import MB, ReadLimits
from rag.reading.reader import ReadCancelled, ReaderProcess
from rag.reading.sections import Section, Skipped
from tests.document_bombs import (
    write_entity_docx,
    write_expanding_docx,
    write_huge_page_pdf,
    write_lying_docx,
    write_many_page_pdf,
    write_many_runs_docx,
    write_nested_docx,
    write_words_docx,
)
from tests.helpers import write_docx, write_pdf

pytestmark = pytest.mark.integration

# What `hearth ingest` may use at its peak on any of the bombs, itself and its reader process together: the
# reader's own limit (1 GB by default) plus the indexing process with the embedding model loaded.
PEAK_BUDGET_BYTES = 2 * 1024 * MB
# Slow enough that only Cancel or the time limit ends it.
PATIENT = ReadLimits(timeout_s=600, max_page_s=600)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bombs")
    write_expanding_docx(folder / "expanding.docx", 2 << 30)  # 6 MB on disk, 2 GB of XML
    write_lying_docx(folder / "lying.docx", 2 << 30)  # the same, declaring 4 KB
    write_nested_docx(folder / "nested.docx", 10_000_000)  # 160 KB: docx2txt took 3 minutes and 3 GB
    write_nested_docx(folder / "deep.docx", 50_000)  # small enough to pass the archive checks
    write_many_runs_docx(folder / "runs.docx", 3_000_000)  # 170 KB: 3 million runs
    write_entity_docx(folder / "entities.docx", 1_000_000)  # 370 KB: 8 GB of text once its entities expand
    write_entity_docx(folder / "small-entities.docx", 5_000)  # small enough to pass the archive checks
    write_many_page_pdf(folder / "pages.pdf", 100_000)
    write_many_page_pdf(folder / "false-count.pdf", 20_000, declared_pages=1)
    write_huge_page_pdf(folder / "huge-page.pdf")  # one 200 × 200 inch page of 60 MB of text operators
    return folder


@pytest.fixture
def reader() -> Iterator[ReaderProcess]:
    process = ReaderProcess(ReadLimits())
    yield process
    process.close()


def refusal(reader: ReaderProcess, path: Path) -> str:
    with pytest.raises(Skipped) as caught:
        reader.read(path, CancelToken())
    return caught.value.reason


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("expanding.docx", r"document\.xml expands \d+ times \(from 6 MB to 2\.0 GB\), the mark of a 'zip bomb'"),
        ("lying.docx", "word/document.xml does not hold what the archive declares"),
        ("nested.docx", "the mark of a 'zip bomb'"),
        ("deep.docx", "nests elements more than 1,000 levels deep"),
        ("runs.docx", "the mark of a 'zip bomb'"),
        ("entities.docx", "the mark of a 'zip bomb'"),
        ("small-entities.docx", "declares a DTD (XML entities), which Word never writes"),
        ("pages.pdf", "it has 100,000 pages, more than the 5,000 Hearth reads per PDF (HEARTH_RAG__MAX_PDF_PAGES)"),
        ("false-count.pdf", "it has too many pages, more than the 5,000"),
        ("huge-page.pdf", "page 1 "),  # too slow for the page's time limit, or too complex for pypdf's own
    ],
)
def test_each_bomb_is_refused_with_its_reason(reader: ReaderProcess, bombs: Path, name: str, words: str) -> None:
    reason = refusal(reader, bombs / name)
    assert re.search(words if words.startswith("document") else re.escape(words), reason), reason


def test_text_is_bounded_by_what_files_expand_to(reader: ReaderProcess, tmp_path: Path) -> None:
    small = ReaderProcess(ReadLimits(max_text_chars=100_000))
    try:
        words = write_words_docx(tmp_path / "words.docx", 150_000)  # compresses like real text: passes the checks
        pages = write_pdf(tmp_path / "pages.pdf", ["The lamp was lit again. " * 90] * 60)
        header = ",".join(f"a column named at length, number {n}" for n in range(300))
        # Every row of one-letter cells repeats the 300 column names: 600 bytes read as 12,000 characters.
        (tmp_path / "rows.csv").write_text(header + "\n" + ("x," * 300 + "\n") * 500)
        (tmp_path / "long.txt").write_text("The lamp was lit again.\n" * 5_000)
        for path in (words, pages, tmp_path / "rows.csv", tmp_path / "long.txt"):
            assert "more than 100,000 characters of text" in refusal(small, path), path.name
        assert sum(len(s.text) for s in reader.read(words, CancelToken())) > 100_000  # the default allows it
    finally:
        small.close()


def test_a_file_needing_too_much_memory_is_stopped_and_the_next_one_read(tmp_path: Path) -> None:
    lean = ReaderProcess(ReadLimits(memory_bytes=256 * MB))
    try:
        big = tmp_path / "big.txt"
        with big.open("w") as out:
            for _ in range(300):
                out.write("The lamp was lit again and the sea was calm. " * 23_000)  # 300 MB in all
        assert "needed more than 256 MB of memory" in refusal(lean, big)
        small = tmp_path / "small.txt"
        small.write_text("The keeper climbed the stairs.")
        assert lean.read(small, CancelToken()) == [Section("The keeper climbed the stairs.")]
        assert lean.started == 2  # the process that ran out of memory was replaced
    finally:
        lean.close()


def test_a_file_that_takes_too_long_is_stopped_and_the_next_one_read(bombs: Path, tmp_path: Path) -> None:
    hasty = ReaderProcess(ReadLimits(timeout_s=2, max_page_s=600))
    try:
        assert "reading it took longer than 2 s" in refusal(hasty, bombs / "huge-page.pdf")
        page = write_pdf(tmp_path / "fine.pdf", ["Fresnel lenses focus the beam."])
        assert hasty.read(page, CancelToken()) == [Section("Fresnel lenses focus the beam.", page=1)]
    finally:
        hasty.close()


def test_cancel_reaches_inside_a_file(bombs: Path, tmp_path: Path) -> None:
    patient = ReaderProcess(PATIENT)
    try:
        cancel = CancelToken()
        threading.Timer(1.0, cancel.cancel).start()
        with pytest.raises(ReadCancelled):
            patient.read(bombs / "huge-page.pdf", cancel)
        note = write_docx(tmp_path / "note.docx", ["The harbour master keeps the tide tables."])
        assert patient.read(note, CancelToken()) == [Section("The harbour master keeps the tide tables.")]
    finally:
        patient.close()


@pytest.mark.parametrize(
    ("head", "section"),
    [
        ("<title><b>Owls</b> at  night</title>", "Owls at night"),  # LangChain's loader named this one "None"
        ("<title>   </title>", "Night birds"),  # an empty title: the first heading names it
        ("", "Night birds"),
    ],
)
def test_html_text_before_any_heading_is_named_by_the_text_of_its_title(
    reader: ReaderProcess, tmp_path: Path, head: str, section: str
) -> None:
    page = tmp_path / "owls.html"
    page.write_text(
        f"<html><head>{head}</head><body><p>Owls hunt.</p><h1>Night <i>birds</i></h1><p>They sleep by day.</p>"
        "</body></html>"
    )
    before, under = reader.read(page, CancelToken())
    assert (before.text, before.section) == ("Owls hunt.", section)
    assert (under.text, under.section) == ("Night birds\nThey sleep by day.", "Night birds")
    bare = tmp_path / "bare.html"
    bare.write_text("<html><head><title></title></head><body><p>Owls hunt.</p></body></html>")
    assert reader.read(bare, CancelToken()) == [Section("Owls hunt.")]


def test_a_reader_process_killed_from_outside_is_replaced(reader: ReaderProcess, tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("The keeper climbed the stairs.")
    assert reader.read(note, CancelToken()) == [Section("The keeper climbed the stairs.")]
    workers = [p for p in psutil.Process().children() if "rag.reading.reader_worker" in " ".join(p.cmdline())]
    assert len(workers) == 1
    workers[0].kill()
    workers[0].wait(10)
    assert reader.read(note, CancelToken()) == [Section("The keeper climbed the stairs.")]
    assert reader.started == 2


def test_cancel_during_a_file_leaves_it_unrecorded_and_the_next_run_reads_it(
    documents: DocumentServices, bombs: Path, tmp_path: Path
) -> None:
    from rag.ingest import Ingestor

    folder = tmp_path / "queue"
    folder.mkdir()
    (folder / "a-slow.pdf").write_bytes((bombs / "huge-page.pdf").read_bytes())
    (folder / "b-note.txt").write_text("The keeper climbed the stairs.")
    patient = Ingestor(documents.manifest, documents.store, documents.embedder, 100 * MB, ReaderProcess(PATIENT))
    try:
        cancel = CancelToken()
        outcomes: list[FileOutcome] = []
        for event in patient.ingest([folder], "queue", cancel):
            if isinstance(event, IngestProgress) and event.current == "a-slow.pdf":
                threading.Timer(1.0, cancel.cancel).start()
            elif isinstance(event, FileOutcome):
                outcomes.append(event)
        assert [(Path(o.path).name, o.outcome, o.reason) for o in outcomes] == [
            ("a-slow.pdf", "skipped", "cancelled while it was being read")
        ]
        assert documents.files("queue") == []  # nothing recorded: the next run reads it again
    finally:
        patient.close()
    again = {Path(e.path).name: e for e in documents.ingestor.ingest([folder], "queue") if isinstance(e, FileOutcome)}
    assert again["b-note.txt"].outcome == "indexed"
    assert again["a-slow.pdf"].outcome == "skipped" and "page 1 " in again["a-slow.pdf"].reason


def test_hearth_ingest_refuses_every_bomb_within_its_memory_budget(
    isolated_home: Path, bombs: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    for bomb in bombs.iterdir():
        shutil.copy(bomb, folder / bomb.name)
    write_docx(folder / "harbour.docx", ["The harbour master keeps the tide tables."])
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}
    command = [sys.executable, "-m", "app", "ingest", str(folder), "--collection", "bombs"]
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout_file, err.open("w") as stderr_file:
        process = subprocess.Popen(command, stdout=stdout_file, stderr=stderr_file, text=True, env=env)
        peak = _watch_peak_memory(process)
        process.wait(timeout=60)
    stdout, stderr = out.read_text(), err.read_text()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stdout + stderr
    lines = {line.split()[1].rstrip(":"): line for line in stdout.splitlines() if line.strip()}
    assert lines.pop("harbour.docx").startswith("indexed")
    assert sorted(lines) == sorted(p.name for p in bombs.iterdir())
    assert all(line.startswith("skipped") for line in lines.values()), stdout
    assert peak < PEAK_BUDGET_BYTES, f"peak {peak / MB:.0f} MB"


def _watch_peak_memory(process: subprocess.Popen[str]) -> int:
    """The largest resident size of ``process`` and its children together, sampled until it exits."""
    peak = 0
    watched = psutil.Process(process.pid)
    deadline = time.monotonic() + 900
    while process.poll() is None and time.monotonic() < deadline:
        total = 0
        try:
            for member in [watched, *watched.children(recursive=True)]:
                total += member.memory_info().rss
        except psutil.Error:
            pass
        peak = max(peak, total)
        time.sleep(0.02)
    return peak
