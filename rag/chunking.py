"""Split sections into chunks sized by the embedding model's own tokenizer, with overlap, keeping where each
chunk came from. Chunk ids are derived from the file's content hash and the chunk's position, so indexing the
same file again writes the same ids (no duplicates after a crash and a re-run)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rag.loaders import Section

DEFAULT_CHUNK_TOKENS = 200
DEFAULT_OVERLAP_TOKENS = 32


@dataclass(frozen=True)
class Chunk:
    id: str
    text: str
    index: int
    page: int | None
    section: str | None


def chunk_id(file_sha256: str, index: int) -> str:
    return hashlib.sha256(f"{file_sha256}:{index}".encode()).hexdigest()[:32]


def chunk_sections(
    sections: Sequence[Section],
    tokenizer: Any,
    file_sha256: str,
    max_tokens: int,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
) -> list[Chunk]:
    """Chunks of at most ``chunk_tokens`` tokens (never more than the model's ``max_tokens``, special tokens
    included), ``overlap_tokens`` shared between neighbours, each remembering its page and section."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        tokenizer, chunk_size=min(chunk_tokens, max_tokens - 2), chunk_overlap=overlap_tokens
    )
    chunks: list[Chunk] = []
    for section in sections:
        for piece in splitter.split_text(section.text):
            for part in _fit(piece, tokenizer, max_tokens):
                index = len(chunks)
                chunks.append(Chunk(chunk_id(file_sha256, index), part, index, section.page, section.section))
    return chunks


def _fit(text: str, tokenizer: Any, max_tokens: int) -> list[str]:
    """The splitter cannot cut inside a single long 'word' (a URL, a base64 blob); halve such pieces until each
    fits, so the embedding model never silently drops the end of a chunk."""
    text = text.strip()
    if not text:
        return []
    if len(tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"]) <= max_tokens:
        return [text]
    middle = len(text) // 2
    return _fit(text[:middle], tokenizer, max_tokens) + _fit(text[middle:], tokenizer, max_tokens)
