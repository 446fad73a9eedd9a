"""Okapi BM25 over a collection's chunks, in memory.

Postings are precomputed as per-document term weights, so a query costs one array sum per query term: a few
milliseconds at 100,000 chunks. Tokens are lower-cased words with common English stop words removed.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

K1 = 1.2
B = 0.75
_WORD = re.compile(r"\w+")
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "he",
        "her",
        "his",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "that",
        "the",
        "their",
        "them",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "do",
        "does",
        "did",
        "how",
        "can",
    ]
)


def tokenize(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower()) if word not in STOP_WORDS]


@dataclass(frozen=True)
class Posting:
    documents: np.ndarray  # int32 document indexes
    weights: np.ndarray  # float32 BM25 weight of the term in each of those documents


class BM25Index:
    def __init__(self, texts: Sequence[str]) -> None:
        self.size = len(texts)
        token_lists = [tokenize(text) for text in texts]
        lengths = np.array([len(tokens) for tokens in token_lists], dtype=np.float32)
        average = float(lengths.mean()) if self.size and lengths.sum() else 1.0
        per_term: dict[str, tuple[list[int], list[int]]] = {}
        for index, tokens in enumerate(token_lists):
            for term, count in Counter(tokens).items():
                documents, counts = per_term.setdefault(term, ([], []))
                documents.append(index)
                counts.append(count)
        self._postings: dict[str, Posting] = {}
        for term, (documents, counts) in per_term.items():
            docs = np.asarray(documents, dtype=np.int32)
            tf = np.asarray(counts, dtype=np.float32)
            idf = math.log(1.0 + (self.size - len(documents) + 0.5) / (len(documents) + 0.5))
            norm = K1 * (1.0 - B + B * lengths[docs] / average)
            self._postings[term] = Posting(docs, (idf * tf * (K1 + 1.0) / (tf + norm)).astype(np.float32))

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """Best ``limit`` (document index, score) pairs, highest first; documents with no query term are left out."""
        scores = np.zeros(self.size, dtype=np.float32)
        hit = False
        for term in set(tokenize(query)):
            posting = self._postings.get(term)
            if posting is not None:
                scores[posting.documents] += posting.weights
                hit = True
        if not hit or limit <= 0:
            return []
        limit = min(limit, self.size)
        top = np.argpartition(-scores, limit - 1)[:limit]
        ranked = top[np.argsort(-scores[top], kind="stable")]
        return [(int(i), float(scores[i])) for i in ranked if scores[i] > 0]
