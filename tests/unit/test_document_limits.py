"""The pure rules that bound a document: ZIP archive checks, the text count, section names, unreadable entries."""

from __future__ import annotations

import errno
import os
import stat
import zipfile
from pathlib import Path

import pytest

from rag.discovery import NOT_FOUND, special_kind, unreadable_reason
from rag.reading.archive import Part, archive_problem, declared_entries
from rag.reading.limits import MB, ReadLimits, size_words
from rag.reading.loaders import detect_encoding, heading_text
from rag.reading.sections import Skipped, TextBudget

LIMITS = ReadLimits()


@pytest.mark.parametrize(
    ("parts", "members", "problem"),
    [
        ([Part("word/document.xml", 40_000, 400_000)], 5, None),  # an ordinary document: 10 times
        ([Part("word/document.xml", 2_000, 900_000)], 5, None),  # 450 times, but small parts may
        ([Part("word/document.xml", 6 * MB, 2048 * MB)], 5, "expands 341 times (from 6 MB to 2.0 GB)"),
        ([Part("word/document.xml", 4 * MB, 300 * MB)], 5, "expand to 300 MB of XML, more than the 256 MB"),
        ([Part(f"word/header{n}.xml", 1 * MB, 90 * MB) for n in range(3)], 8, "expand to 270 MB"),
        ([], 200_000, "an archive of 200,000 parts, more than the 10,000"),
    ],
)
def test_archives_are_judged_by_what_they_declare(parts: list[Part], members: int, problem: str | None) -> None:
    found = archive_problem(parts, members, LIMITS)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_the_entry_count_is_read_from_the_end_record(tmp_path: Path) -> None:
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for number in range(70_000):  # past 65,535: the count moves to the ZIP64 end record
            archive.writestr(f"{number}", b"")
    assert declared_entries(path) == 70_000
    (tmp_path / "not.zip").write_bytes(b"plain text, no archive")
    assert declared_entries(tmp_path / "not.zip") is None


def test_the_text_count_stops_just_past_the_limit() -> None:
    budget = TextBudget(ReadLimits(max_text_chars=10))
    assert budget.take("12345") == "12345"
    assert budget.take("67890") == "67890"
    with pytest.raises(Skipped, match=r"more than 10 characters of text.*HEARTH_RAG__MAX_TEXT_CHARS"):
        budget.take("x")


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("Owls", "Owls"),
        ("<b>Owls</b> at  night", "Owls at night"),  # a title read as plain text that still holds tags
        ("  \n\t ", None),
        ("", None),
        ("None", "None"),  # a document may really be called that; only a missing title must not become it
        ("x" * 300, "x" * 199 + "…"),
    ],
)
def test_section_names_come_from_the_text_of_a_title(raw: str, name: str | None) -> None:
    assert heading_text(raw) == name


@pytest.mark.parametrize(
    ("code", "is_link", "is_folder", "words"),
    [
        (errno.ELOOP, True, False, "symbolic link that leads back to itself"),
        (errno.ENOENT, True, False, "symbolic link to something that does not exist"),
        (errno.ENOENT, False, False, NOT_FOUND),
        (errno.EACCES, False, False, "may not read it (permission denied)"),
        (errno.EACCES, False, True, "may not open this folder (permission denied); nothing in it was read"),
        (errno.EIO, False, False, "cannot be read (Input/output error)"),
    ],
)
def test_unreadable_entries_get_a_reason(code: int, is_link: bool, is_folder: bool, words: str) -> None:
    assert words in unreadable_reason(OSError(code, os.strerror(code)), is_link, is_folder)


def test_pipes_and_devices_are_not_regular_files() -> None:
    assert special_kind(stat.S_IFIFO | 0o644) == "a named pipe"
    assert special_kind(stat.S_IFCHR | 0o644) == "a device"
    assert special_kind(stat.S_IFREG | 0o644) is None
    assert special_kind(stat.S_IFDIR | 0o755) is None


def test_sizes_read_like_a_person_would_say_them() -> None:
    assert [size_words(n) for n in (300, 161 * 1024, 6 * MB, 2048 * MB)] == ["1 KB", "161 KB", "6 MB", "2.0 GB"]


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Le château se trouve à côté de la forêt. Où est la crème brûlée?\n", "cp1252"),
        ("日本語のテキストファイルです。東京は大きな都市です。", "shift_jis"),  # no line break, no space
    ],
)
def test_the_encoding_of_a_large_file_is_guessed_from_its_start(tmp_path: Path, text: str, encoding: str) -> None:
    path = tmp_path / "large.txt"
    path.write_bytes((text * 20_000).encode(encoding))  # over a megabyte: guessing from all of it took seconds
    assert path.read_bytes().decode(detect_encoding(path)) == text * 20_000
