"""Read a file into text sections with their place (page or section), using LangChain's document loaders.

One loader per kind of file, the lightest real one: pypdf for PDF (one section per page), docx2txt for Word,
BeautifulSoup for HTML, plain reading for text and Markdown, the CSV loader for tables (one section per row).
Text encodings are detected, not assumed. Every refusal is a :class:`Skipped` with a reason a person can act on.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.encodings import guess_legacy_encoding

log = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".pdf", ".docx", ".html", ".htm", ".md", ".markdown", ".txt", ".text", ".csv")
# Share of control characters above which a "text" file is really binary.
BINARY_CONTROL_SHARE = 0.05


class Skipped(Exception):
    """This file was not indexed; ``reason`` says why and what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Section:
    text: str
    page: int | None = None  # 1-based, PDF only
    section: str | None = None  # heading path, CSV row, …


def load_file(path: Path) -> list[Section]:
    suffix = path.suffix.lower()
    loader = _LOADERS.get(suffix)
    if loader is None:
        raise Skipped(
            f"{suffix or 'files without an extension'} is not supported; Hearth reads {', '.join(SUPPORTED_SUFFIXES)}"
        )
    try:
        sections = [s for s in loader(path) if s.text.strip()]
    except Skipped:
        raise
    # Third-party parsers fail in arbitrary ways on malformed files; one file never stops the rest.
    except Exception as exc:
        log.warning("could not read %s", path, exc_info=True)
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
            guess = guess_legacy_encoding(raw)
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


def _quiet_loader(factory: Callable[[], Any]) -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loader = factory()
        return list(loader.load())


def _load_pdf(path: Path) -> list[Section]:
    from langchain_community.document_loaders import PyPDFLoader
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            raise Skipped("the PDF is encrypted; save an unlocked copy and add that")
        documents = _quiet_loader(lambda: PyPDFLoader(str(path), mode="page"))
    except Skipped:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise Skipped(f"the PDF cannot be read ({type(exc).__name__}: {exc}); it may be damaged") from exc
    return [Section(doc.page_content, page=int(doc.metadata.get("page", 0)) + 1) for doc in documents]


def _load_docx(path: Path) -> list[Section]:
    import zipfile

    from langchain_community.document_loaders import Docx2txtLoader

    try:
        documents = _quiet_loader(lambda: Docx2txtLoader(str(path)))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise Skipped(f"the Word file cannot be read ({type(exc).__name__}); it may be damaged") from exc
    return [Section(doc.page_content) for doc in documents]


def _load_html(path: Path) -> list[Section]:
    from langchain_community.document_loaders import BSHTMLLoader

    encoding = detect_encoding(path)
    documents = _quiet_loader(
        lambda: BSHTMLLoader(
            str(path), open_encoding=encoding, bs_kwargs={"features": "html.parser"}, get_text_separator="\n"
        )
    )
    sections = []
    for doc in documents:
        title = doc.metadata.get("title") or None
        sections.append(Section(_collapse_blank_lines(doc.page_content), section=title))
    return sections


def _load_text(path: Path) -> list[Section]:
    from langchain_community.document_loaders import TextLoader

    encoding = detect_encoding(path)
    return [Section(doc.page_content) for doc in _quiet_loader(lambda: TextLoader(str(path), encoding=encoding))]


def _load_markdown(path: Path) -> list[Section]:
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    (whole,) = _load_text(path)
    splitter = MarkdownHeaderTextSplitter(
        headers_to_split_on=[("#", "h1"), ("##", "h2"), ("###", "h3")], strip_headers=False
    )
    sections = []
    for doc in splitter.split_text(whole.text):
        heading = " › ".join(doc.metadata[key] for key in ("h1", "h2", "h3") if key in doc.metadata)
        sections.append(Section(doc.page_content, section=heading or None))
    return sections


def _load_csv(path: Path) -> list[Section]:
    import csv

    from langchain_community.document_loaders import CSVLoader

    encoding = detect_encoding(path)
    try:
        documents = _quiet_loader(lambda: CSVLoader(str(path), encoding=encoding))
    except (csv.Error, RuntimeError, UnicodeDecodeError) as exc:
        raise Skipped(f"the CSV file cannot be parsed ({exc})") from exc
    return [Section(doc.page_content, section=f"row {int(doc.metadata.get('row', 0)) + 1}") for doc in documents]


def _collapse_blank_lines(text: str) -> str:
    lines = [line.strip() for line in text.splitlines()]
    kept: list[str] = []
    for line in lines:
        if line or (kept and kept[-1]):
            kept.append(line)
    return "\n".join(kept).strip()


_LOADERS: dict[str, Callable[[Path], list[Section]]] = {
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
