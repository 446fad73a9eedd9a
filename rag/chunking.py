"""Split sections into chunks sized by the embedding model's own tokenizer, with overlap, keeping where each
chunk came from. Chunk ids are derived from the file's content hash and the chunk's position, so indexing the
same file again writes the same ids (no duplicates after a crash and a re-run).

The text is tokenized once, in blocks of bounded size, and chunks are cut between tokens: at a paragraph break if
one is near the end of the window, else a line break, a sentence end or a space. LangChain's recursive splitter,
used before, asks the tokenizer for the length of every piece it tries (every word, or every character of text
without spaces): 300,000 characters of prose took 12 s, without paragraph breaks 97 s, and text with no spaces at
all minutes, while one pass over the same text takes a second or two. It remains for tokenizers without offsets.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rag.reading.entries import entry_starts
from rag.reading.sections import Section

DEFAULT_CHUNK_TOKENS = 200
DEFAULT_OVERLAP_TOKENS = 32
# Characters tokenized at a time: bounds the memory of the token offsets whatever the length of a section.
BLOCK_CHARS = 100_000
# How far back from a block's end to look for a line break or space to end the block on.
BLOCK_SLACK_CHARS = 2_000
# Chunk texts whose token counts are checked in one call.
CHECK_BATCH = 512

Span = tuple[int, int]  # a token's characters: text[start:end]


@dataclass(frozen=True)
class Chunk:
    id: str
    text: str
    index: int
    page: int | None
    section: str | None


def searchable_text(text: str, section: str | None) -> str:
    """What is embedded and keyword-indexed for a passage: its text under its heading path, so that a passage deep
    in "Shell Commands › Compound Commands" is found by words that only its headings say. Headings the text
    already starts with are not repeated. The user is shown the text alone."""
    if not section:
        return text
    headings = [h for h in section.split(" › ") if h and not text.startswith(h)]
    return "\n".join([" › ".join(headings), text]) if headings else text


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
    size = min(chunk_tokens, max_tokens - 2)
    if getattr(tokenizer, "is_fast", False):
        pieces = [
            (piece, section)
            for section in sections
            for piece in _token_windows(section.text, tokenizer, size, overlap_tokens)
        ]
    else:
        pieces = _split_with_langchain(sections, tokenizer, size, overlap_tokens)
    chunks: list[Chunk] = []
    for start in range(0, len(pieces), CHECK_BATCH):
        batch = pieces[start : start + CHECK_BATCH]
        counts = _token_counts([piece for piece, _ in batch], tokenizer)
        for (piece, section), count in zip(batch, counts, strict=True):
            parts = [piece] if count <= max_tokens else _fit(piece, tokenizer, max_tokens)
            for part in parts:
                index = len(chunks)
                chunks.append(Chunk(chunk_id(file_sha256, index), part, index, section.page, section.section))
    return chunks


def _token_windows(text: str, tokenizer: Any, size: int, overlap: int) -> Iterator[str]:
    """The chunk texts of one section, tokenizing it a block at a time; a chunk that would run into the next
    block starts that block instead, so blocks leave no seams."""
    start = 0
    while start < len(text):
        end = block_end(text, start)
        block = text[start:end]
        spans: list[Span] = tokenizer(
            block, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False
        )["offset_mapping"]
        last = end >= len(text)
        i = 0
        while i < len(spans):
            if not last and i > 0 and i + size >= len(spans):
                break  # the rest continues in the next block
            stop = cut_before(block, spans, i, size)
            yield block[spans[i][0] : spans[stop - 1][1]]
            if stop >= len(spans):
                i = len(spans)
                break
            i = next_start(block, spans, i, stop, overlap)
        if last:
            return
        start = start + max(spans[i][0], 1) if i < len(spans) else end


def block_end(text: str, start: int) -> int:
    """Where the block beginning at ``start`` ends: the end of the text, or a line break or space just before
    ``BLOCK_CHARS`` (mid-word only for text without either)."""
    limit = start + BLOCK_CHARS
    if limit >= len(text):
        return len(text)
    for mark in ("\n", " "):
        at = text.rfind(mark, limit - BLOCK_SLACK_CHARS, limit)
        if at > start:
            return at + 1
    return limit


def _gap_rank(text: str, spans: Sequence[Span], k: int) -> int:
    """How good a place to cut is just before token ``k``: 4 a paragraph break or the start of an option entry
    (a line that begins ``-e Exit immediately…``, after one that is not an option name alone), 3 a line break, 2 a
    sentence end, 1 a space, 0 inside a word."""
    gap = text[spans[k - 1][1] : spans[k][0]]
    if not gap:
        return 0
    if "\n\n" in gap or "\n\r\n" in gap:
        return 4
    if "\n" in gap:
        return 4 if entry_starts(text, spans[k][0]) else 3
    if text[spans[k - 1][0] : spans[k - 1][1]] in (".", "!", "?", "。", "!", "?"):
        return 2
    return 1 if gap.isspace() else 0


def cut_before(text: str, spans: Sequence[Span], start: int, size: int) -> int:
    """The token the chunk beginning at token ``start`` ends before: at most ``size`` tokens on, at the best kind
    of break in the window's last three quarters (the latest one of that kind)."""
    end = min(start + size, len(spans))
    if end == len(spans):
        return end
    best, best_rank = end, -1
    for k in range(end, start + max(size // 4, 1) - 1, -1):
        rank = _gap_rank(text, spans, k)
        if rank > best_rank:
            best, best_rank = k, rank
            if rank == 4:
                break
    return best


def next_start(text: str, spans: Sequence[Span], start: int, stop: int, overlap: int) -> int:
    """Where the chunk after ``[start, stop)`` begins: about ``overlap`` tokens before ``stop``, at the start of
    a word (never later than ``stop``, always after ``start``)."""
    first = max(stop - overlap, start + 1)
    for k in range(first, stop):
        if _gap_rank(text, spans, k) > 0:
            return k
    return min(first, stop)


def _token_counts(texts: Sequence[str], tokenizer: Any) -> list[int]:
    if not texts:
        return []
    encoded = tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    return [len(ids) for ids in encoded]


def _split_with_langchain(
    sections: Sequence[Section], tokenizer: Any, size: int, overlap: int
) -> list[tuple[str, Section]]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        tokenizer, chunk_size=size, chunk_overlap=overlap
    )
    return [(piece, section) for section in sections for piece in splitter.split_text(section.text) if piece.strip()]


def _fit(text: str, tokenizer: Any, max_tokens: int) -> list[str]:
    """A cut can still leave a piece the model would truncate (a URL, a base64 blob re-tokenized on its own);
    halve such pieces until each fits, so the embedding model never silently drops the end of a chunk."""
    text = text.strip()
    if not text:
        return []
    if len(tokenizer(text, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]) <= max_tokens:
        return [text]
    middle = len(text) // 2
    return _fit(text[:middle], tokenizer, max_tokens) + _fit(text[middle:], tokenizer, max_tokens)
