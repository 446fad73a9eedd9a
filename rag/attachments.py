"""A file attached to one conversation: read like a collection's files (in the reader process, within the same
limits), split into passages and embedded, then either given to the model whole or searched.

Reading and searching live here; where an attachment is kept (with its conversation) and whether it goes whole or
searched for a given question (:func:`plan_attachments`) are decided by the caller. Attachments are few and small
next to a collection (a 50-page PDF makes about 150 passages), so searching them is a brute-force cosine over their
vectors beside an in-memory keyword index, fused the way :class:`rag.retrieval.retriever.Retriever` fuses a
collection's."""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag.reading.sections import Section, Skipped

if TYPE_CHECKING:  # what reads, embeds and searches is imported when used: chat imports this module
    import numpy as np

    from backends.base import CancelToken
    from rag.reading.reader import DocumentReader
    from rag.retrieval.embeddings import Embedder

# Candidates taken from each ranking before fusion (as many as a collection's search takes).
CANDIDATES_PER_RANKING = 40

# Passages embedded per call, so progress moves and Cancel is looked at between calls. Calls take passages of
# similar length (shortest first), so a batch pads little: on a 52-page PDF (241 passages) 7.0 s instead of 8.8 s
# in file order, and batches of 32 or 64 were no faster.
EMBED_BATCH = 16


@dataclass(frozen=True)
class AttachedPassage:
    index: int
    text: str
    page: int | None
    section: str | None


@dataclass(frozen=True)
class ReadAttachment:
    """A file read for a conversation: its whole text (for giving it to the model whole) and its passages with one
    unit vector each (for searching it)."""

    name: str
    sha256: str
    text: str
    pages: int | None
    passages: tuple[AttachedPassage, ...]
    vectors: np.ndarray
    embedder: str


@dataclass(frozen=True)
class AttachProgress:
    """How far attaching ``name`` has got: ``step`` is "reading" (pages) or "embedding" (passages)."""

    name: str
    step: str
    done: int
    total: int | None

    @property
    def words(self) -> str:
        """ "Attaching report.pdf: reading page 12 of 50", as the page and the terminal show it."""
        unit = "page" if self.step == "reading" else "passage"
        if self.total is None:
            where = f"{self.step} ({self.done} {unit}s so far)" if self.done else self.step
        else:
            where = f"{self.step} {unit} {min(self.done + 1, self.total)} of {self.total}"
        return f"Attaching {self.name}: {where}"


def whole_text(sections: Sequence[Section]) -> str:
    """The file's text as the model reads it whole: sections in order, each under its page or heading."""
    parts: list[str] = []
    for section in sections:
        where = f"(page {section.page})" if section.page is not None else f"## {section.section or ''}"
        parts.append(section.text if where == "## " else f"{where}\n{section.text}")
    return "\n\n".join(part.strip() for part in parts if part.strip())


def read_attachment(
    path: Path,
    reader: DocumentReader,
    embedder: Embedder,
    max_file_bytes: int,
    cancel: CancelToken,
    name: str | None = None,
) -> Generator[AttachProgress, None, ReadAttachment]:
    """Read, split and embed ``path`` (shown as ``name``, by default the file's own name). Raises :class:`Skipped`
    with the reason a person can act on (too large, unreadable, not a supported kind, encrypted, empty), or
    :class:`rag.reading.reader.ReadCancelled`."""
    import numpy as np

    from models.gguf import sha256_of
    from rag.chunking import chunk_sections, searchable_text
    from rag.discovery import special_kind, unreadable_reason
    from rag.reading.reader import ReadCancelled, relay

    shown = name or path.name
    try:
        stat = path.stat()
    except FileNotFoundError as exc:
        raise Skipped("there is no such file; check its name and folder") from exc
    except OSError as exc:
        raise Skipped(unreadable_reason(exc, path.is_symlink())) from exc
    kind = special_kind(stat.st_mode)
    if path.is_dir():
        raise Skipped("it is a folder; attach files one by one, or add the folder to a collection")
    if kind is not None:
        raise Skipped(f"it is {kind}, not a regular file")
    if stat.st_size > max_file_bytes:
        raise Skipped(f"it is larger than the {max_file_bytes >> 20} MB limit (HEARTH_RAG__MAX_FILE_MB)")
    yield AttachProgress(shown, "reading", 0, None)
    digest = sha256_of(path)
    reading = reader.reading(path, cancel)
    sections = yield from relay(
        reading, lambda read: AttachProgress(shown, "reading", read.pages_done, read.pages_total)
    )
    text = whole_text(sections)
    if not text.strip():
        raise Skipped("no text could be read from it (a scanned PDF holds pictures of pages, not text)")
    chunks = chunk_sections(sections, embedder.tokenizer(), digest, embedder.max_tokens)
    passages = tuple(AttachedPassage(c.index, c.text, c.page, c.section) for c in chunks)
    texts = [searchable_text(p.text, p.section) for p in passages]
    by_length = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors = np.zeros((len(passages), embedder.dimension), dtype=np.float32)
    for start in range(0, len(by_length), EMBED_BATCH):
        if cancel.cancelled:
            raise ReadCancelled
        yield AttachProgress(shown, "embedding", start, len(passages))
        batch = by_length[start : start + EMBED_BATCH]
        vectors[batch] = embedder.embed([texts[i] for i in batch])
    yield AttachProgress(shown, "embedding", len(passages), len(passages))
    pages = max((s.page for s in sections if s.page is not None), default=None)
    return ReadAttachment(shown, digest, text, pages, passages, vectors, embedder.name)


@dataclass(frozen=True)
class AttachedHit:
    """A passage of an attachment found for a question."""

    attachment_id: int
    passage: AttachedPassage


@dataclass(frozen=True)
class Searchable:
    """An attachment as searching needs it."""

    attachment_id: int
    passages: Sequence[AttachedPassage]
    vectors: np.ndarray


def search_attachments(
    files: Sequence[Searchable], query: str, query_vector: np.ndarray, top_k: int
) -> tuple[list[AttachedHit], float]:
    """The ``top_k`` passages of ``files`` best for ``query``, fused from a keyword, a vector and an exact-term
    ranking (as for a collection), and the milliseconds it took."""
    import numpy as np

    from rag.chunking import searchable_text
    from rag.retrieval.bm25 import BM25Index
    from rag.retrieval.fusion import EXACT_WEIGHT, drop_near_duplicates, reciprocal_rank_fusion

    started = time.perf_counter()
    hits = [AttachedHit(f.attachment_id, p) for f in files for p in f.passages]
    if not hits:
        return [], 0.0
    vectors = np.concatenate([f.vectors for f in files]) if len(files) > 1 else files[0].vectors
    keyword = BM25Index([searchable_text(h.passage.text, h.passage.section) for h in hits])
    keyword_ids = [i for i, _ in keyword.search(query, CANDIDATES_PER_RANKING)]
    similarity = vectors @ query_vector.astype(np.float32)
    vector_ids = [int(i) for i in np.argsort(-similarity, kind="stable")[:CANDIDATES_PER_RANKING]]
    exact_ids = keyword.exact_matches(query)
    fused = reciprocal_rank_fusion(
        [[str(i) for i in keyword_ids], [str(i) for i in vector_ids], [str(i) for i in exact_ids]],
        weights=(1.0, 1.0, EXACT_WEIGHT),
    )
    ordered = [hits[int(i)] for i, _ in fused]
    found = drop_near_duplicates(ordered, lambda h: h.passage.text, limit=top_k)
    return found, (time.perf_counter() - started) * 1000
