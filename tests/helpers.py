"""Helpers shared by tests: fixture inventories and the skip-or-fail rule for real components."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backends.hardware import HardwareInventory, LlamaCppBuild

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM = Path("/usr/bin/chromium")


def require(available: bool, component: str, remedy: str) -> None:
    """Skip when a real component is missing on a developer machine; fail in CI, where it must be there."""
    if available:
        return
    message = f"{component} is not available ({remedy})"
    if IN_CI:
        pytest.fail(f"CI requires {message}", pytrace=False)
    pytest.skip(message)


def make_inventory(
    ram_available_gib: float = 16.0,
    physical_cores: int = 4,
    llama: bool = True,
    flags: frozenset[str] | None = None,
) -> HardwareInventory:
    gib = 1 << 30
    return HardwareInventory(
        cpu_model="Test CPU",
        physical_cores=physical_cores,
        logical_cores=physical_cores * 2,
        isa_flags=flags if flags is not None else frozenset({"avx2", "fma"}),
        ram_total_bytes=int(max(ram_available_gib, 1) * 2 * gib),
        ram_available_bytes=int(ram_available_gib * gib),
        os="Linux test",
        llama_cpp=LlamaCppBuild("0.3.36", ("cpu", "rpc"), True) if llama else None,
    )


def write_tiny_gguf(
    path: Path,
    *,
    context_length: int = 2048,
    chat_template: str | None = None,
    tensors: int = 2,
    extra: dict[str, int] | None = None,
) -> Path:
    """A small but well-formed llama-architecture GGUF, written with the gguf package's own writer."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny test model")
    writer.add_context_length(context_length)
    writer.add_block_count(2)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["<s>", "</s>", "hello", "world"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for key, value in (extra or {}).items():
        writer.add_uint32(key, value)
    for index in range(tensors):
        writer.add_tensor(f"blk.{index}.attn_q.weight", np.full((8, 64), index, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_pdf(path: Path, pages: list[str]) -> Path:
    """A small, valid PDF with one line of real text per page (Helvetica), written by hand."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for text in pages:
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content_ref = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content_ref, 0)
        )
        kids.append(len(objects))
    font_ref = len(objects) + 1
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects = [o.replace(b"/F1 0 0 R", b"/F1 %d 0 R" % font_ref) for o in objects]
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def write_docx(path: Path, paragraphs: list[str]) -> Path:
    """A minimal Word document: the parts docx2txt (and Word) need."""
    import zipfile
    from xml.sax.saxutils import escape

    body = "".join(f"<w:p><w:r><w:t>{escape(p)}</w:t></w:r></w:p>" for p in paragraphs)
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        f"<w:body>{body}</w:body></w:document>"
    )
    content_types = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/word/document.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
    )
    rels = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        'officeDocument" Target="word/document.xml"/></Relationships>'
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("[Content_Types].xml", content_types)
        archive.writestr("_rels/.rels", rels)
        archive.writestr("word/document.xml", document)
    return path
