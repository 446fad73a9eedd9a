"""Read a file into text sections with their place (page or section).

One loader per kind of file, the lightest real one: pypdf for PDF (one section per page, :mod:`rag.reading.pdf_text`), a
streaming reader for Word (:mod:`rag.reading.docx_text`, one section per heading), BeautifulSoup for HTML and rendered
Markdown (one section per heading, :mod:`rag.reading.html_text`), plain reading for text, the csv module for tables (one
section per row, :mod:`rag.reading.csv_rows`). Every section's text is cleaned the same way
(:mod:`rag.reading.clean_text`: no invisible characters or permalink marks). Text encodings are detected, not assumed.
Every refusal is a :class:`Skipped` with a reason a person can act on. Each loader counts the text it extracts against
:class:`ReadLimits` as it goes, so a file that expands past the limit stops early; time and memory are bounded around
all of this by the process that runs it (:mod:`rag.reading.reader`)."""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag.reading.clean_text import clean_text
from rag.reading.encodings import guess_legacy_encoding
from rag.reading.limits import ReadLimits
from rag.reading.sections import Section, Skipped, TextBudget, heading_text

__all__ = ["SUPPORTED_SUFFIXES", "Section", "Skipped", "detect_encoding", "heading_text", "load_file"]

log = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".pdf", ".docx", ".html", ".htm", ".md", ".markdown", ".txt", ".text", ".csv")
# Share of control characters above which a "text" file is really binary.
BINARY_CONTROL_SHARE = 0.05
# Bytes of a legacy-encoded file that its encoding is guessed from: scoring chardet's guesses costs seconds per
# megabyte (a 3.5 MB Windows-1252 file took a minute), and the start of a file says as much as all of it.
ENCODING_SAMPLE_BYTES = 64 * 1024

Loader = Callable[[Path, ReadLimits, TextBudget], list[Section]]


def load_file(path: Path, limits: ReadLimits | None = None) -> list[Section]:
    """The sections of ``path``, or :class:`Skipped`. A :class:`MemoryError` is let through: the caller (the reader
    process) reports it against the memory limit and starts afresh."""
    limits = limits or ReadLimits()
    suffix = path.suffix.lower()
    # A file named without an extension (LICENSE, README, NEWS, copyright) is read as text when it is text: the
    # encoding check refuses one that is binary.
    loader = _load_text if not suffix and not path.name.startswith(".") else _LOADERS.get(suffix)
    if loader is None:
        raise Skipped(
            f"{suffix or 'a hidden file'} is not supported; Hearth reads {', '.join(SUPPORTED_SUFFIXES)} and text "
            "files without an extension"
        )
    try:
        sections = [_cleaned(s) for s in loader(path, limits, TextBudget(limits))]
        sections = [s for s in sections if s.text]
    except (Skipped, MemoryError):
        raise
    # Third-party parsers fail in arbitrary ways on malformed files; one file never stops the rest. The reason goes
    # to the user; the traceback only to a debug log (never to the terminal).
    except Exception as exc:
        log.debug("could not read %s", path, exc_info=True)
        raise Skipped(f"the file could not be read ({type(exc).__name__}: {exc})") from exc
    if not sections:
        raise Skipped("no text found (an empty file, or a scanned PDF without a text layer; OCR is not supported)")
    return sections


def _cleaned(section: Section) -> Section:
    return dataclasses.replace(section, text=clean_text(section.text))


def detect_encoding(path: Path) -> str:
    """The encoding of a text file, or :class:`Skipped` if it is not text at all.

    UTF-8 (and BOM-marked files) first; otherwise the most plausible of chardet's guesses (``rag.reading.encodings``).
    """
    raw = path.read_bytes()
    if not raw.strip():
        raise Skipped("the file is empty")
    if raw.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    elif raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    else:
        try:
            raw.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            guess = guess_legacy_encoding(_encoding_sample(raw))
            if not guess:
                raise Skipped("the file is not text (it looks binary); rename it or remove it") from None
            encoding = guess
    try:
        text = raw.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        raise Skipped(f"the file looks like {encoding} text but does not decode; save it as UTF-8") from None
    controls = sum(1 for ch in text if ord(ch) < 32 and ch not in "\t\n\r\f")
    if "\x00" in text or controls > BINARY_CONTROL_SHARE * max(len(text), 1):
        raise Skipped("the file is not text (it looks binary); rename it or remove it")
    return encoding


def _encoding_sample(raw: bytes) -> bytes:
    """The start of ``raw``, ended at a line break or a space: bytes below 0x40 are never the second byte of a
    character in the legacy encodings (Shift-JIS, GBK, Big5, EUC), so no character is cut in two."""
    if len(raw) <= ENCODING_SAMPLE_BYTES:
        return raw
    head = raw[:ENCODING_SAMPLE_BYTES]
    cut = max(head.rfind(b"\n"), head.rfind(b" "))
    if cut > 0:
        return head[: cut + 1]
    # No separator at all: drop a trailing run of high bytes, which may be a character's first half.
    return head.rstrip(bytes(range(0x80, 0x100))) or head


def _quiet_loader(factory: Callable[[], Any]) -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loader = factory()
        return list(loader.load())


def _load_pdf(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from rag.reading.pdf_text import pdf_sections

    return pdf_sections(path, limits, budget)


def _load_docx(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from rag.reading.docx_text import docx_sections

    return docx_sections(path, limits, budget)


def _load_html(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from rag.reading.html_text import html_sections

    encoding = detect_encoding(path)
    return html_sections(path.read_text(encoding=encoding, errors="replace"), budget)


def _load_text(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from langchain_community.document_loaders import TextLoader

    encoding = detect_encoding(path)
    documents = _quiet_loader(lambda: TextLoader(str(path), encoding=encoding))
    return [Section(budget.take(doc.page_content)) for doc in documents]


def _load_markdown(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from rag.reading.markdown_text import markdown_sections

    encoding = detect_encoding(path)
    return markdown_sections(path.read_text(encoding=encoding, errors="replace"), budget)


def _load_csv(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from rag.reading.csv_rows import csv_sections

    encoding = detect_encoding(path)
    with path.open(encoding=encoding, errors="replace", newline="") as lines:
        return csv_sections(lines, budget)


_LOADERS: dict[str, Loader] = {
    ".pdf": _load_pdf,
    ".docx": _load_docx,
    ".html": _load_html,
    ".htm": _load_html,
    ".md": _load_markdown,
    ".markdown": _load_markdown,
    ".txt": _load_text,
    ".text": _load_text,
    ".csv": _load_csv,
}
