"""What the Documents tab says about an ingestion and about each file."""

from pathlib import Path

from app.ui.document_text import cancelling_line, collection_summary, file_rows, progress_line, upload_report
from rag.ingest import FileOutcome, IngestProgress, StepProgress
from rag.manifest import FileRecord


def test_progress_names_the_file_its_step_the_rate_and_the_time_left() -> None:
    reading = StepProgress("reading", 40, 196, elapsed_s=2.9, per_s=13.8, eta_s=11.3)
    line = progress_line(IngestProgress(0, 5, "bash_ref.pdf", 0, None, position=1, step=reading))
    assert line == (
        "Indexing 1 of 5: **bash\\_ref.pdf** · reading page 40 of 196 · 14 pages/s · about 11 s to go "
        "· all files: estimating…"
    )
    embedding = StepProgress("embedding", 320, 1180, elapsed_s=7.1, per_s=45.2, eta_s=19.0, files=3)
    line = progress_line(IngestProgress(2, 10, "notes.md", 120, 75.0, position=5, step=embedding))
    assert line == (
        "Indexing 5 of 10: **notes.md** · embedding 320 of 1,180 passages from 3 files · 45 passages/s · "
        "about 19 s to go · all files: 1 min left"
    )
    # The last file: no estimate for "all files" beside its own; before any page is counted, the time it has taken.
    started = StepProgress("reading", elapsed_s=3.2)
    assert progress_line(IngestProgress(4, 5, "big.docx", 9, 2.0, position=5, step=started)) == (
        "Indexing 5 of 5: **big.docx** · reading (3 s)"
    )
    assert progress_line(IngestProgress(3, 3, "", 9, 0.0, position=3)) == "Indexed 3 of 3 files."


def test_cancelling_says_so_and_names_the_file_it_stops() -> None:
    progress = IngestProgress(1, 4, "manual.pdf", 10, None, position=2, step=StepProgress("embedding", 8, 900))
    assert cancelling_line(progress) == "Cancelling… (stopping at **manual.pdf**) What was indexed so far is kept."
    assert cancelling_line(None) == "Cancelling… What was indexed so far is kept."


def test_the_report_counts_new_files_and_gives_each_skip_its_reason() -> None:
    outcomes = [
        FileOutcome("/k/a.md", "indexed", 3),
        FileOutcome("/k/b.pdf", "indexed", 4),
        FileOutcome("/k/c.md", "unchanged", 2),
        FileOutcome("/k/evil_*name*.bin", "skipped", reason="it is not a supported type"),
    ]
    report = upload_report(outcomes, total=4, cancelled=False)
    lines = report.splitlines()
    assert lines[0] == "Added 2 files (7 passages). Already in this collection, unchanged: c.md."
    assert lines[1] == "- Skipped **evil\\_\\*name\\*.bin**: it is not a supported type"
    assert "Cancelled" not in report


def test_a_cancelled_upload_says_what_was_kept_and_its_counts_add_up() -> None:
    report = upload_report([FileOutcome("/k/a.md", "indexed", 1)], total=5, cancelled=True)
    assert report.endswith(
        "Cancelled after 1 of 5 files. What was indexed is kept; add the other 4 files again to finish."
    )
    outcomes = [
        FileOutcome("/k/a.md", "indexed", 1),
        FileOutcome("/k/empty.txt", "skipped", reason="the file is empty"),
        FileOutcome("/k/big.pdf", "skipped", reason="cancelled before it was indexed", cancelled=True),
    ]
    report = upload_report(outcomes, total=4, cancelled=True)
    assert "- Skipped **empty.txt**: the file is empty" in report
    assert "cancelled before" not in report  # a file stopped by Cancel is not listed as refused
    assert report.endswith(
        "Cancelled after 2 of 4 files (**big.pdf** stopped part-way, not added). What was indexed is kept; add the "
        "other 2 files again to finish."
    )
    assert upload_report(outcomes[:2], total=2, cancelled=True).endswith(
        "Cancelled after 2 of 2 files. What was indexed is kept."
    )
    assert upload_report([], total=0, cancelled=False) == "Nothing to add."


def test_file_rows_mark_uploaded_copies_and_show_skip_reasons(tmp_path: Path) -> None:
    owned = tmp_path / "documents" / "kb-x"
    records = [
        FileRecord(str(owned / "a.md"), "h", 1, 1, "indexed", 3, ""),
        FileRecord("/home/me/papers/b.pdf", "h2", 1, 1, "skipped", 0, "it is encrypted"),
    ]
    assert file_rows(records, owned) == [
        ["a.md", "indexed", 3, "uploaded"],
        ["b.pdf", "skipped: it is encrypted", 0, "/home/me/papers"],
    ]
    assert collection_summary("Work", records) == "**Work**: 1 file, 3 passages, 1 skipped."
    assert (
        collection_summary("Work", records, "http://10.0.0.5:8000")
        == "**Work**: 1 file, 3 passages, 1 skipped, on the Chroma server `http://10.0.0.5:8000`."
    )
    assert collection_summary(None, []).startswith("No collections yet.")
