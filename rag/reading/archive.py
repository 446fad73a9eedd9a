"""Office files are ZIP archives. Before any part is read, what the archive declares is checked (how many parts,
how large the wanted parts become, how much they expand); while a part is read, what it really expands to is
counted, because declared sizes can be false. A 'zip bomb' is refused with its numbers, before it costs anything.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rag.reading.limits import ReadLimits, size_words
from rag.reading.sections import Skipped

CHUNK_BYTES = 64 * 1024
_END_RECORD = b"PK\x05\x06"
_END_RECORD_BYTES = 22
_LONGEST_COMMENT = 0xFFFF
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_END_RECORD = b"PK\x06\x06"


@dataclass(frozen=True)
class Part:
    name: str
    compressed_bytes: int
    expanded_bytes: int  # as declared by the archive


def declared_entries(path: Path) -> int | None:
    """How many entries the archive's end record declares, read before Python's zipfile builds an object for
    every entry (a 100 MB archive can list two million); ``None`` when there is no end record to read."""
    size = path.stat().st_size
    with path.open("rb") as file:
        tail_bytes = min(size, _END_RECORD_BYTES + _LONGEST_COMMENT)
        file.seek(size - tail_bytes)
        tail = file.read(tail_bytes)
        at = tail.rfind(_END_RECORD)
        if at < 0 or at + _END_RECORD_BYTES > len(tail):
            return None  # not a ZIP archive; zipfile says so in its own words
        (entries,) = struct.unpack_from("<H", tail, at + 10)
        locator = at - 20
        if entries != 0xFFFF or locator < 0 or tail[locator : locator + 4] != _ZIP64_LOCATOR:
            return int(entries)
        # A ZIP64 archive: the locator just before the end record points at the ZIP64 end record.
        (record_at,) = struct.unpack_from("<Q", tail, locator + 8)
        file.seek(record_at)
        record = file.read(56)
        if len(record) < 56 or record[:4] != _ZIP64_END_RECORD:
            return int(entries)
        return int(struct.unpack_from("<Q", record, 32)[0])


def archive_problem(parts: Sequence[Part], member_count: int, limits: ReadLimits) -> str | None:
    """Why an archive with ``member_count`` entries, of which ``parts`` are to be read, must not be read."""
    if member_count > limits.max_archive_members:
        return (
            f"it is an archive of {member_count:,} parts, more than the {limits.max_archive_members:,} Hearth opens "
            "in one Office file; it was not read"
        )
    for part in parts:
        ratio = part.expanded_bytes / max(part.compressed_bytes, 1)
        if part.expanded_bytes > limits.ratio_grace_bytes and ratio > limits.max_expansion_ratio:
            return (
                f"its part {part.name} expands {ratio:,.0f} times (from {size_words(part.compressed_bytes)} to "
                f"{size_words(part.expanded_bytes)}), the mark of a 'zip bomb'; Hearth refuses Office parts that "
                f"expand more than {limits.max_expansion_ratio} times, so it was not read"
            )
    total = sum(part.expanded_bytes for part in parts)
    if total > limits.max_part_bytes:
        return (
            f"its text parts expand to {size_words(total)} of XML, more than the {size_words(limits.max_part_bytes)} "
            "Hearth reads from one Office file; it was not read. Split the document into smaller files"
        )
    return None


def entry_count_problem(path: Path, limits: ReadLimits) -> str | None:
    entries = declared_entries(path)
    if entries is not None and entries > limits.max_archive_members:
        return archive_problem((), entries, limits)
    return None


def checked_parts(archive: zipfile.ZipFile, wanted: Callable[[str], bool], limits: ReadLimits) -> list[zipfile.ZipInfo]:
    """The entries of ``archive`` that ``wanted`` names, in archive order, once the archive passes the checks."""
    entries = archive.infolist()
    parts = [info for info in entries if wanted(info.filename)]
    problem = archive_problem(
        [Part(info.filename, info.compress_size, info.file_size) for info in parts], len(entries), limits
    )
    if problem:
        raise Skipped(problem)
    return parts


class PartReader:
    """Streams parts of one archive, counting what they really expand to: more than a part declares, or more than
    the limit for the whole file, stops the reading (Python's zipfile also stops at the declared size and then
    fails the part's checksum; this count does not rely on that)."""

    def __init__(self, archive: zipfile.ZipFile, limits: ReadLimits) -> None:
        self._archive = archive
        self._limits = limits
        self.expanded_bytes = 0

    def chunks(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        read = 0
        try:
            with self._archive.open(info) as stream:
                while chunk := stream.read(CHUNK_BYTES):
                    read += len(chunk)
                    self.expanded_bytes += len(chunk)
                    if read > info.file_size:
                        raise Skipped(self._false_sizes(info))
                    if self.expanded_bytes > self._limits.max_part_bytes:
                        raise Skipped(
                            f"its text parts expand to more than {size_words(self._limits.max_part_bytes)} of XML, "
                            "the most Hearth reads from one Office file; it was not read"
                        )
                    yield chunk
        except zipfile.BadZipFile as exc:
            raise Skipped(f"{self._false_sizes(info)} ({exc})") from exc

    @staticmethod
    def _false_sizes(info: zipfile.ZipInfo) -> str:
        return (
            f"its part {info.filename} does not hold what the archive declares: the file is damaged, or its sizes "
            "are false; it was not read"
        )
