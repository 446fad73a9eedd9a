"""Keeping copies of uploaded files: names from the browser, repeats, and new versions."""

from pathlib import Path

from app.services.library.uploads import discard_copy, keep_uploads, safe_file_name, tidy_copies, unique_names
from models.gguf import sha256_of
from rag.manifest import FileRecord


def test_browser_names_become_plain_visible_file_names() -> None:
    assert safe_file_name("report.pdf") == "report.pdf"
    assert safe_file_name("../../etc/passwd") == "passwd"
    assert safe_file_name("C:\\Users\\me\\notes.md") == "notes.md"
    assert safe_file_name(".bashrc") == "bashrc"
    assert safe_file_name("...") == "upload"
    assert safe_file_name("bad\x00name\n.txt") == "badname.txt"
    long = safe_file_name("x" * 500 + ".pdf")
    assert len(long) == 200
    assert long.endswith(".pdf")


def test_two_files_with_one_name_in_a_batch_are_both_kept() -> None:
    assert unique_names(["a.md", "b.md", "A.md", "a.md", "README"]) == [
        "a.md",
        "b.md",
        "A (2).md",
        "a (3).md",
        "README",
    ]
    assert unique_names(["README", "README"]) == ["README", "README (2)"]


def test_uploading_the_same_file_twice_keeps_one_untouched_copy(tmp_path: Path) -> None:
    upload = tmp_path / "tmp" / "notes.md"
    upload.parent.mkdir()
    upload.write_text("tides")
    folder = tmp_path / "kept"
    (first,) = keep_uploads([upload], folder)
    before = first.path.stat().st_mtime_ns
    (second,) = keep_uploads([upload], folder)
    assert first.path == second.path == folder / "notes.md"
    assert first.previous is None and second.previous is None
    assert second.path.stat().st_mtime_ns == before  # unchanged, so the index sees nothing to redo
    upload.write_text("tides, revised")
    (third,) = keep_uploads([upload], folder)
    assert third.path.read_text() == "tides, revised"
    assert third.previous is not None and third.previous.read_text() == "tides"  # until the new one is indexed
    assert sorted(p.name for p in folder.iterdir()) == [".notes.md.previous", "notes.md"]  # no partial file


def test_only_hearths_own_copies_are_ever_deleted(tmp_path: Path) -> None:
    folder = tmp_path / "kept"
    folder.mkdir()
    mine = folder / "a.txt"
    mine.write_text("x")
    theirs = tmp_path / "b.txt"
    theirs.write_text("y")
    discard_copy(theirs, folder)
    discard_copy(mine, folder)
    assert theirs.exists()
    assert not mine.exists()


def _record(path: Path) -> FileRecord:
    return FileRecord(str(path), sha256_of(path), path.stat().st_size, 0, "indexed", 1, "")


def test_a_killed_upload_leaves_only_what_the_collection_lists(tmp_path: Path) -> None:
    folder = tmp_path / "kb-notes"
    folder.mkdir()
    listed = folder / "listed.md"
    listed.write_text("kept")
    unlisted = folder / "copied-but-not-indexed.md"  # killed between the copy and the index
    unlisted.write_text("orphan")
    (folder / ".half.md.partial").write_text("half")  # killed while copying
    replaced = folder / "plan.md"  # killed while indexing a new version of plan.md: the old one is put back
    replaced.write_text("old plan")
    records = {str(listed): _record(listed), str(replaced): _record(replaced)}
    replaced.replace(folder / ".plan.md.previous")
    replaced.write_text("new plan, never indexed")
    removed = tidy_copies(folder, records)
    assert sorted(p.name for p in removed) == [".half.md.partial", "copied-but-not-indexed.md"]
    assert sorted(p.name for p in folder.iterdir()) == ["listed.md", "plan.md"]
    assert replaced.read_text() == "old plan" and listed.read_text() == "kept"


def test_a_replacement_indexed_before_the_kill_stays(tmp_path: Path) -> None:
    folder = tmp_path / "kb-notes"
    folder.mkdir()
    current = folder / "plan.md"
    current.write_text("new plan, indexed")
    (folder / ".plan.md.previous").write_text("old plan")
    assert [p.name for p in tidy_copies(folder, {str(current): _record(current)})] == [".plan.md.previous"]
    assert [p.name for p in folder.iterdir()] == ["plan.md"] and current.read_text() == "new plan, indexed"
    assert tidy_copies(tmp_path / "missing", {}) == []
