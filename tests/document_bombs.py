"""Hostile documents, written efficiently for the tests: Word files that expand to gigabytes (honestly declared, or
with lying sizes), Word files that are small but slow to parse, PDFs with 100,000 pages or one enormous page.

Nothing here inflates anything: a deflate block compressed after a full flush compresses to the same bytes every
time, so gigabytes of XML are written as one small compressed block repeated, and a PDF with many pages shares one
content stream.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

WORD_NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
CONTENT_TYPES = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    b'<Default Extension="xml" ContentType="application/xml"/>'
    b'<Override PartName="/word/document.xml" '
    b'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
BLOCK_BYTES = 1 << 20


@dataclass(frozen=True)
class _Member:
    name: str
    data: bytes  # raw deflate data
    crc: int
    size: int  # what it really expands to
    declared_size: int  # what the headers say it expands to


def _repeated(pieces: list[tuple[bytes, int]]) -> tuple[bytes, int, int]:
    """Raw deflate data, CRC and size of the concatenation of each ``piece`` repeated ``count`` times."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    out: list[bytes] = []
    crc = 0
    size = 0
    for piece, count in pieces:
        block = compressor.compress(piece) + compressor.flush(zlib.Z_FULL_FLUSH)
        # After a full flush the compressor forgets its history, so the same input compresses to the same bytes.
        out.append(block * count)
        for _ in range(count):
            crc = zlib.crc32(piece, crc)
        size += len(piece) * count
    out.append(compressor.flush(zlib.Z_FINISH))
    return b"".join(out), crc, size


def _member(name: str, pieces: list[tuple[bytes, int]], declared_size: int | None = None) -> _Member:
    data, crc, size = _repeated(pieces)
    return _Member(name, data, crc, size, size if declared_size is None else declared_size)


def _write_zip(path: Path, members: list[_Member]) -> Path:
    """A ZIP (no ZIP64: every size stays under 4 GiB) written by hand, so sizes can be declared as we like."""
    central: list[bytes] = []
    with path.open("wb") as out:
        for member in members:
            offset = out.tell()
            name = member.name.encode()
            fields = (20, 0, zipfile.ZIP_DEFLATED, 0, 0x21, member.crc, len(member.data), member.declared_size)
            out.write(struct.pack("<4sHHHHHIII", b"PK\x03\x04", *fields) + struct.pack("<HH", len(name), 0) + name)
            out.write(member.data)
            central.append(
                struct.pack("<4sH", b"PK\x01\x02", 20)
                + struct.pack("<HHHHHIII", *fields)
                + struct.pack("<HHHHHII", len(name), 0, 0, 0, 0, 0, offset)
                + name
            )
        start = out.tell()
        directory = b"".join(central)
        out.write(directory)
        out.write(struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(members), len(members), len(directory), start, 0))
    return path


def _times(piece: bytes, count: int, per_block: int) -> list[tuple[bytes, int]]:
    """``piece`` repeated ``count`` times, as whole blocks of ``per_block`` pieces and one block for the rest."""
    whole, rest = divmod(count, per_block)
    return [(piece * per_block, whole), (piece * rest, 1)]


def _small(name: str, data: bytes) -> _Member:
    return _member(name, [(data, 1)])


def _docx(path: Path, document: list[tuple[bytes, int]], declared_size: int | None = None) -> Path:
    return _write_zip(
        path,
        [_small("[Content_Types].xml", CONTENT_TYPES), _member("word/document.xml", document, declared_size)],
    )


def _paragraphs(text: str, repeat_to_bytes: int) -> list[tuple[bytes, int]]:
    opening = f'<?xml version="1.0" encoding="UTF-8"?><w:document {WORD_NS}><w:body>'.encode()
    paragraph = f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>".encode()
    block = paragraph * max(BLOCK_BYTES // len(paragraph), 1)
    return [(opening, 1), (block, max(repeat_to_bytes // len(block), 1)), (b"</w:body></w:document>", 1)]


def write_expanding_docx(path: Path, expanded_bytes: int) -> Path:
    """A DOCX whose document.xml really expands to ``expanded_bytes`` of ordinary paragraphs, sizes declared
    honestly (about 1,000 times smaller on disk)."""
    return _docx(path, _paragraphs("The lamp was lit again. ", expanded_bytes))


def write_lying_docx(path: Path, expanded_bytes: int, declared_bytes: int = 4096) -> Path:
    """Like :func:`write_expanding_docx`, but its headers claim document.xml expands to only ``declared_bytes``."""
    return _docx(path, _paragraphs("The lamp was lit again. ", expanded_bytes), declared_size=declared_bytes)


def write_nested_docx(path: Path, depth: int) -> Path:
    """A small DOCX whose one word sits inside ``depth`` nested paragraphs: docx2txt (an ElementTree of the whole
    part) takes minutes and gigabytes on it."""
    opening = f'<?xml version="1.0" encoding="UTF-8"?><w:document {WORD_NS}><w:body>'.encode()
    return _docx(
        path,
        [
            (opening, 1),
            *_times(b"<w:p>", depth, 100_000),
            (b"<w:r><w:t>deep</w:t></w:r>", 1),
            *_times(b"</w:p>", depth, 100_000),
            (b"</w:body></w:document>", 1),
        ],
    )


def write_many_runs_docx(path: Path, runs: int) -> Path:
    """A small DOCX with one paragraph of ``runs`` one-letter runs (each run is an element tree of its own)."""
    opening = f'<?xml version="1.0" encoding="UTF-8"?><w:document {WORD_NS}><w:body><w:p>'.encode()
    run = b"<w:r><w:t>a</w:t></w:r>"
    return _docx(path, [(opening, 1), *_times(run, runs, 50_000), (b"</w:p></w:body></w:document>", 1)])


def write_words_docx(path: Path, characters: int, seed: int = 7) -> Path:
    """A DOCX of ``characters`` of random words (it compresses like real text, about 3 times), in paragraphs."""
    import random

    letters = "etaoinshrdlucmfwypvbgkjqxz"
    chooser = random.Random(seed)
    words: list[str] = []
    length = 0
    while length < characters:
        word = "".join(chooser.choice(letters) for _ in range(chooser.randint(2, 9)))
        words.append(word)
        length += len(word) + 1
    paragraphs = "".join(
        f"<w:p><w:r><w:t>{' '.join(words[i : i + 80])}</w:t></w:r></w:p>" for i in range(0, len(words), 80)
    )
    document = f'<?xml version="1.0" encoding="UTF-8"?><w:document {WORD_NS}><w:body>{paragraphs}</w:body></w:document>'
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", CONTENT_TYPES)
        archive.writestr("word/document.xml", document)
    return path


def write_entity_docx(path: Path, references: int) -> Path:
    """A DOCX whose document.xml declares an XML entity of 8,000 characters and uses it ``references`` times, each
    use padded so that the expansion stays just under expat's own amplification limit (100 times the input): a
    few hundred kilobytes on disk, gigabytes of text for a parser that expands entities. Word never writes a DTD."""
    opening = (
        f'<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE w:document [<!ENTITY lamp "{"lamp " * 1600}">]>'
        f"<w:document {WORD_NS}><w:body>"
    ).encode()
    use = b"<w:p><w:r><w:t>&lamp;</w:t></w:r></w:p><!--" + b"." * 64 + b"-->"
    closing = b"</w:body></w:document>"
    return _docx(path, [(opening, 1), *_times(use, references, 10_000), (closing, 1)])


def _write_pdf_objects(path: Path, objects: list[bytes]) -> Path:
    """A PDF from numbered objects (object n is ``objects[n - 1]``; 1 is the catalog), with a correct xref."""
    with path.open("wb") as out:
        out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for number, body in enumerate(objects, start=1):
            offsets.append(out.tell())
            out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
        xref = out.tell()
        out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
        out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
        out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return path


def write_many_page_pdf(path: Path, pages: int, fan_out: int = 500, declared_pages: int | None = None) -> Path:
    """A PDF of ``pages`` pages that all share one content stream ("Page after page."), in a two-level page tree
    (one level when ``fan_out`` is at least ``pages``); ``declared_pages`` puts a false count in its root."""
    font, content, root = 2, 3, 4
    nodes = -(-pages // fan_out)
    first_node = root + 1
    first_page = first_node + nodes
    stream = b"BT /F1 12 Tf 72 720 Td (Page after page.) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages %d 0 R >>" % root,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Pages /Kids [%s] /Count %d /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> >>"
        % (b" ".join(b"%d 0 R" % (first_node + n) for n in range(nodes)), declared_pages or pages, font),
    ]
    for node in range(nodes):
        kids = range(first_page + node * fan_out, first_page + min((node + 1) * fan_out, pages))
        objects.append(
            b"<< /Type /Pages /Parent %d 0 R /Kids [%s] /Count %d >>"
            % (root, b" ".join(b"%d 0 R" % kid for kid in kids), len(kids))
        )
    for page in range(pages):
        parent = first_node + page // fan_out
        objects.append(b"<< /Type /Page /Parent %d 0 R /Contents %d 0 R >>" % (parent, content))
    return _write_pdf_objects(path, objects)


def write_slow_pdf(path: Path, pages: int, content_bytes: int = 200_000) -> Path:
    """A PDF whose ``pages`` pages share one content stream of ``content_bytes`` of text-drawing instructions: each
    page takes pypdf a second or more to read, each within the time allowed per page, the whole file much longer."""
    line = b"BT /F1 9 Tf 1 0 0 1 20 20 Tm (The lamp was lit again and the sea was calm.) Tj ET\n"
    stream = zlib.compress(line * (content_bytes // len(line)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> >>"
        % (b" ".join(b"%d 0 R" % (5 + n) for n in range(pages)), pages),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
    ]
    objects += [b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>"] * pages
    return _write_pdf_objects(path, objects)


def write_huge_page_pdf(path: Path, content_bytes: int = 60_000_000) -> Path:
    """A one-page PDF, 200 × 200 inches (the largest page PDF allows), whose compressed content stream expands to
    ``content_bytes`` of text-drawing instructions (under pypdf's own 75 MB cap per stream)."""
    line = b"BT /F1 9 Tf 1 0 0 1 20 20 Tm (The lamp was lit again and the sea was calm.) Tj ET\n"
    block = line * (BLOCK_BYTES // len(line))
    data, _, _ = _repeated([(block, max(content_bytes // len(block), 1))])
    # zlib framing around the raw deflate data (pypdf checks the Adler-32 only when it can; it is computed here).
    adler = 1
    for _ in range(max(content_bytes // len(block), 1)):
        adler = zlib.adler32(block, adler)
    stream = b"\x78\xda" + data + struct.pack(">I", adler)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 14400 14400] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _write_pdf_objects(path, objects)
