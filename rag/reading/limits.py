"""How much reading one document may cost, and the reasons given when a document goes over.

Documents are bounded by what they expand to, not by their size on disk: a 6 MB Word file can hold 2 GB of XML,
a 10 MB PDF 100,000 pages, 40 KB of XML entities gigabytes of text. Pure values and wording; the reader process
(:mod:`rag.reading.reader`) and the loaders enforce them.
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1 << 20


@dataclass(frozen=True)
class ReadLimits:
    # Text extracted from one file, in characters (about 2,000 pages of prose by default).
    max_text_chars: int = 5_000_000
    max_pdf_pages: int = 5_000
    # pypdf's text extraction slows with the square of a page's text (1 MB of text operators took 43 s here), and
    # a font can map one code to many characters, so the work per page is bounded by time.
    max_page_s: float = 10.0
    # Wall-clock time and memory of the process that reads one file.
    timeout_s: float = 120.0
    memory_bytes: int = 1024 * MB
    # Office files are ZIP archives of XML parts: their parts, what those expand to and how deep their XML nests.
    max_archive_members: int = 10_000
    max_part_bytes: int = 256 * MB  # the parts read from one file, together, once expanded
    max_expansion_ratio: int = 100  # real Office XML compresses 5 to 20 times; deflate allows about 1,000
    ratio_grace_bytes: int = 1 * MB  # small parts may compress as well as they like
    max_xml_depth: int = 1_000  # tables nested in tables reach a few dozen levels


def too_much_text(limits: ReadLimits) -> str:
    return (
        f"it holds more than {limits.max_text_chars:,} characters of text, the limit per file "
        "(HEARTH_RAG__MAX_TEXT_CHARS); it was not indexed. Split it into smaller files, or raise the limit"
    )


def too_many_pages(limits: ReadLimits, pages: int | None = None) -> str:
    counted = f"it has {pages:,} pages" if pages is not None else "it has too many pages"
    return (
        f"{counted}, more than the {limits.max_pdf_pages:,} Hearth reads per PDF (HEARTH_RAG__MAX_PDF_PAGES); it "
        "was not indexed. Split it into smaller files, or raise the limit"
    )


def too_slow(limits: ReadLimits) -> str:
    return (
        f"reading it took longer than {limits.timeout_s:g} s, the limit per file (HEARTH_RAG__READ_TIMEOUT_S), so "
        "it was stopped. If the file is genuine, raise the limit or split the file"
    )


def too_much_memory(limits: ReadLimits) -> str:
    return (
        f"reading it needed more than {limits.memory_bytes // MB:,} MB of memory, the limit per file "
        "(HEARTH_RAG__READ_MEMORY_MB), so it was stopped. If the file is genuine, raise the limit or split the file"
    )


def size_words(size_bytes: int) -> str:
    if size_bytes >= 1 << 30:
        return f"{size_bytes / (1 << 30):.1f} GB"
    if size_bytes >= MB:
        return f"{size_bytes / MB:.0f} MB"
    return f"{max(size_bytes // 1024, 1)} KB"
