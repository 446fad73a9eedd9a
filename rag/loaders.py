"""Read a file into text sections with their place (page or section).

One loader per kind of file, the lightest real one: pypdf for PDF (one section per page, :mod:`rag.pdf_text`), a
streaming reader for Word (:mod:`rag.docx_text`), BeautifulSoup for HTML, plain reading for text and Markdown,
LangChain's CSV loader for tables (one section per row). Text encodings are detected, not assumed. Every refusal is
a :class:`Skipped` with a reason a person can act on. Each loader counts the text it extracts against
:class:`ReadLimits` as it goes, so a file that expands past the limit stops early; time and memory are bounded
around all of this by the process that runs it (:mod:`rag.reader`).
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rag.encodings import guess_legacy_encoding
from rag.limits import ReadLimits
from rag.sections import Section, Skipped, TextBudget

__all__ = ["SUPPORTED_SUFFIXES", "Section", "Skipped", "detect_encoding", "heading_text", "load_file"]

log = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".pdf", ".docx", ".html", ".htm", ".md", ".markdown", ".txt", ".text", ".csv")
# Share of control characters above which a "text" file is really binary.
BINARY_CONTROL_SHARE = 0.05
# Bytes of a legacy-encoded file that its encoding is guessed from: scoring chardet's guesses costs seconds per
# megabyte (a 3.5 MB Windows-1252 file took a minute), and the start of a file says as much as all of it.
ENCODING_SAMPLE_BYTES = 64 * 1024
# Longest section name taken from a document's own title.
MAX_HEADING_CHARS = 200
_SPACES = re.compile(r"\s+")

Loader = Callable[[Path, ReadLimits, TextBudget], list[Section]]


def load_file(path: Path, limits: ReadLimits | None = None) -> list[Section]:
    """The sections of ``path``, or :class:`Skipped`. A :class:`MemoryError` is let through: the caller (the reader
    process) reports it against the memory limit and starts afresh."""
    limits = limits or ReadLimits()
    suffix = path.suffix.lower()
    loader = _LOADERS.get(suffix)
    if loader is None:
        raise Skipped(
            f"{suffix or 'files without an extension'} is not supported; Hearth reads {', '.join(SUPPORTED_SUFFIXES)}"
        )
    try:
        sections = [s for s in loader(path, limits, TextBudget(limits)) if s.text.strip()]
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


def detect_encoding(path: Path) -> str:
    """The encoding of a text file, or :class:`Skipped` if it is not text at all.

    UTF-8 (and BOM-marked files) first; otherwise the most plausible of chardet's guesses (``rag.encodings``).
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


def _quiet_rows(factory: Callable[[], Iterable[Any]]) -> Iterable[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield from factory()


def _load_pdf(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from rag.pdf_text import pdf_sections

    return pdf_sections(path, limits, budget)


def _load_docx(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from rag.docx_text import docx_sections

    return docx_sections(path, limits, budget)


def _load_html(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    # BeautifulSoup directly: LangChain's BSHTMLLoader names the section str(soup.title.string), which is the
    # string "None" whenever the title holds markup (<title><b>x</b></title>) or nothing.
    from bs4 import BeautifulSoup

    encoding = detect_encoding(path)
    with path.open(encoding=encoding, errors="replace") as file:
        soup = BeautifulSoup(file, "html.parser")
    title = heading_text(soup.title.get_text(" ") if soup.title else "")
    if title is None:
        first = soup.find(["h1", "h2", "h3"])
        title = heading_text(first.get_text(" ") if first else "")
    text = budget.take(soup.get_text("\n"))
    return [Section(_collapse_blank_lines(text), section=title)]


def heading_text(raw: str) -> str | None:
    """A section name from a document's own title or heading: markup removed, whitespace collapsed, shortened;
    ``None`` (no name) rather than an empty or placeholder one."""
    if "<" in raw:  # a title parsed as plain text can still hold tags (HTML reads <title> as text)
        from bs4 import BeautifulSoup

        raw = BeautifulSoup(raw, "html.parser").get_text(" ")
    text = _SPACES.sub(" ", raw).strip()
    if len(text) > MAX_HEADING_CHARS:
        text = text[: MAX_HEADING_CHARS - 1].rstrip() + "…"
    return text or None


def _load_text(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from langchain_community.document_loaders import TextLoader

    encoding = detect_encoding(path)
    documents = _quiet_loader(lambda: TextLoader(str(path), encoding=encoding))
    return [Section(budget.take(doc.page_content)) for doc in documents]


def _load_markdown(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    (whole,) = _load_text(path, limits, budget)
    splitter = MarkdownHeaderTextSplitter(
        headers_to_split_on=[("#", "h1"), ("##", "h2"), ("###", "h3")], strip_headers=False
    )
    sections = []
    for doc in splitter.split_text(whole.text):
        heading = " › ".join(doc.metadata[key] for key in ("h1", "h2", "h3") if key in doc.metadata)
        sections.append(Section(doc.page_content, section=heading or None))
    return sections


def _load_csv(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    import csv

    from langchain_community.document_loaders import CSVLoader

    encoding = detect_encoding(path)
    # Row by row: every row repeats the column names, so a small file of long names and many empty rows expands
    # without bound; the count stops it at the limit.
    sections = []
    try:
        for doc in _quiet_rows(lambda: CSVLoader(str(path), encoding=encoding).lazy_load()):
            row = int(doc.metadata.get("row", 0)) + 1
            sections.append(Section(budget.take(doc.page_content), section=f"row {row}"))
    except (csv.Error, RuntimeError, UnicodeDecodeError) as exc:
        raise Skipped(f"the CSV file cannot be parsed ({exc})") from exc
    return sections


def _collapse_blank_lines(text: str) -> str:
    lines = [line.strip() for line in text.splitlines()]
    kept: list[str] = []
    for line in lines:
        if line or (kept and kept[-1]):
            kept.append(line)
    return "\n".join(kept).strip()


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
