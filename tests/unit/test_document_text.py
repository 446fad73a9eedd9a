"""What the Documents tab says about an ingestion and about each file."""

from pathlib import Path

from app.ui.document_text import collection_summary, file_rows, progress_line, upload_report
from rag.ingest import FileOutcome, IngestProgress
from rag.manifest import FileRecord


def test_progress_names_the_file_the_rate_and_the_time_left() -> None:
    line = progress_line(IngestProgress(2, 10, "report.pdf", 120, 45.4, 75.0))
    assert line == "Indexing 3 of 10: **report.pdf** · 45 chunks/s · 1 min left"
    assert progress_line(IngestProgress(0, 3, "a.txt", 0, 0.0, None)).endswith("estimating…")
    assert progress_line(IngestProgress(3, 3, "", 9, 3.0, 0.0)) == "Indexed 3 of 3 files."


def test_the_report_counts_new_files_and_gives_each_skip_its_reason() -> None:
    outcomes = [
        FileOutcome("/k/a.md", "indexed", 3),
        FileOutcome("/k/b.pdf", "indexed", 4),
        FileOutcome("/k/c.md", "unchanged", 2),
        FileOutcome("/k/evil_*name*.bin", "skipped", reason="it is not a supported type"),
    ]
    report = upload_report(outcomes, total=4, cancelled=False)
    lines = report.splitlines()
    assert lines[0] == "Added 2 files (7 chunks). Already in this collection, unchanged: c.md."
    assert lines[1] == "- Skipped **evil\\_\\*name\\*.bin**: it is not a supported type"
    assert "Cancelled" not in report


def test_a_cancelled_upload_says_what_was_kept() -> None:
    report = upload_report([FileOutcome("/k/a.md", "indexed", 1)], total=5, cancelled=True)
    assert report.endswith("Cancelled after 1 of 5 files. What was indexed is kept; add the rest again to finish.")
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
    assert collection_summary("Work", records) == "**Work**: 1 file, 3 chunks, 1 skipped."
    assert collection_summary(None, []).startswith("No collections yet.")
