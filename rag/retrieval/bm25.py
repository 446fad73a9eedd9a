"""Okapi BM25 over a collection's chunks, in memory.

Postings are precomputed as per-document term weights, so a query costs one array sum per query term: a few
milliseconds at 100,000 chunks. Tokens are lower-cased words with common English stop words removed; a number,
code or identifier written with inner punctuation ("6.06", "3.11.2", "1e-5", "XR-7742", "SHA-256", "json.dumps",
"O_RDONLY", "--no-deps") is one token as written and also its parts ("6", "06"; "json", "dumps"; "o", "rdonly";
"no", "deps") and, when hyphenated, its parts run together ("sha256"), so an exact value scores as a rare whole
while a partial mention still counts. Such terms, and camel-case identifiers, are the query's *exact terms*
(:meth:`BM25Index.exact_matches`).
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
# A word, or words joined by inner punctuation with nothing between them (a version, a code, a dotted name, a path).
_TERM = re.compile(r"\w+(?:[.\-/:+@]\w+)*")
_PART = re.compile(r"[^\W_]+")
# An inner capital: "jsonDumps", "JSONDecoder", "PyPI" (not "LTS" or "Python").
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z][A-Z][a-z]")
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# Passages that may hold all of a question's exact terms for them to be ranked first; more than this and the terms
# are too common to single a passage out.
MAX_EXACT_MATCHES = 8
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
    tokens: list[str] = []
    for found in _TERM.finditer(text):
        tokens.extend(_term_tokens(found.group()))
    return tokens


def _term_tokens(term: str) -> list[str]:
    whole = term.lower()
    parts = _PART.findall(whole)
    if _CAMEL.search(term):
        parts = [part.lower() for part in _CAMEL_PART.findall(term)]
    if len(parts) == 1 and parts[0] == whole:
        return [] if whole in STOP_WORDS else [whole]
    tokens = [whole]
    if "-" in whole:
        tokens.append("".join(parts))
    tokens.extend(part for part in parts if part not in STOP_WORDS and part != whole)
    return tokens


def exact_terms(query: str) -> list[str]:
    """The terms of ``query`` written as a number, a code, an option or an identifier: with a digit, an underscore,
    a dot or other inner punctuation between words (not a plain hyphenated word such as "built-in"), an inner
    capital, or a leading dash ("6.06", "XR-7742", "json.dumps", "O_RDONLY", "JSONDecoder", "--no-deps"), lower-cased
    as indexed."""
    terms = []
    for found in _TERM.finditer(query):
        term = found.group()
        coded = any(ch.isdigit() or ch in "_./:+@" for ch in term) or bool(_CAMEL.search(term))
        option = found.start() > 0 and query[found.start() - 1] == "-"
        if (coded or option) and len(term) > 1:  # a lone digit or letter singles nothing out
            terms.append(term.lower())
    return list(dict.fromkeys(terms))


@dataclass(frozen=True)
class Posting:
    documents: np.ndarray  # int32 document indexes
    weights: np.ndarray  # float32 BM25 weight of the term in each of those documents


@dataclass(frozen=True)
class Terms:
    """One passage's terms, tokenized once: their ids in a :class:`Vocabulary`, how often each occurs, and how many
    tokens the passage has. Kept per passage, they let an index be built again without reading the text again."""

    ids: np.ndarray  # int32, each term once
    counts: np.ndarray  # int32
    length: int


class Vocabulary:
    """Term ids for :class:`Terms`: an index is built over terms of one vocabulary."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self.names: list[str] = []

    def terms(self, text: str) -> Terms:
        counted = Counter(tokenize(text))
        ids = np.empty(len(counted), dtype=np.int32)
        for place, term in enumerate(counted):
            known = self._ids.get(term)
            if known is None:
                known = self._ids[term] = len(self.names)
                self.names.append(term)
            ids[place] = known
        return Terms(ids, np.fromiter(counted.values(), dtype=np.int32, count=len(counted)), counted.total())


class BM25Index:
    def __init__(self, texts: Sequence[str]) -> None:
        vocabulary = Vocabulary()
        self._build([vocabulary.terms(text) for text in texts], vocabulary)

    @classmethod
    def from_terms(cls, terms: Sequence[Terms], vocabulary: Vocabulary) -> BM25Index:
        """The index over passages already tokenized (``terms``, in the index's document order)."""
        index = cls.__new__(cls)
        index._build(terms, vocabulary)
        return index

    def _build(self, terms: Sequence[Terms], vocabulary: Vocabulary) -> None:
        """Every posting at once: the passages' (term, document, count) triples sorted by term, then each term's
        weights computed over its run, with the same operations, in the same float32, as one term at a time."""
        self.size = len(terms)
        lengths = np.array([t.length for t in terms], dtype=np.float32)
        average = float(lengths.mean()) if self.size and lengths.sum() else 1.0
        self._postings: dict[str, Posting] = {}
        if not self.size:
            return
        term_of = np.concatenate([t.ids for t in terms])
        if not len(term_of):
            return
        doc_of = np.repeat(np.arange(self.size, dtype=np.int32), [len(t.ids) for t in terms])
        count_of = np.concatenate([t.counts for t in terms])
        order = np.argsort(term_of, kind="stable")  # stable: each term's documents stay in ascending order
        term_of, doc_of, tf = term_of[order], doc_of[order], count_of[order].astype(np.float32)
        starts = np.flatnonzero(np.r_[True, term_of[1:] != term_of[:-1]])
        ends = np.r_[starts[1:], len(term_of)]
        norm = K1 * (1.0 - B + B * lengths[doc_of] / average)
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            documents = end - start
            idf = math.log(1.0 + (self.size - documents + 0.5) / (documents + 0.5))
            tf_run = tf[start:end]
            weights = (idf * tf_run * (K1 + 1.0) / (tf_run + norm[start:end])).astype(np.float32)
            self._postings[vocabulary.names[int(term_of[start])]] = Posting(doc_of[start:end], weights)

    def exact_matches(self, query: str, limit: int = MAX_EXACT_MATCHES) -> list[int]:
        """The documents that hold every exact term of ``query`` that the collection holds at all (see
        :func:`exact_terms`), best BM25 score first; none when the query has no such term or when more than
        ``limit`` documents hold them (then they single nothing out)."""
        postings = [self._postings[term] for term in exact_terms(query) if term in self._postings]
        if not postings:
            return []
        common = postings[0].documents
        for posting in postings[1:]:
            common = np.intersect1d(common, posting.documents, assume_unique=True)
        if len(common) == 0 or len(common) > limit:
            return []
        scores = self._scores(query)
        return sorted((int(i) for i in common), key=lambda i: (-float(scores[i]), i))

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """Best ``limit`` (document index, score) pairs, highest first; documents with no query term are left out."""
        scores = self._scores(query)
        if limit <= 0 or not scores.any():
            return []
        limit = min(limit, self.size)
        top = np.argpartition(-scores, limit - 1)[:limit]
        ranked = top[np.argsort(-scores[top], kind="stable")]
        return [(int(i), float(scores[i])) for i in ranked if scores[i] > 0]

    def _scores(self, query: str) -> np.ndarray:
        scores = np.zeros(self.size, dtype=np.float32)
        for term in set(tokenize(query)):
            posting = self._postings.get(term)
            if posting is not None:
                scores[posting.documents] += posting.weights
        return scores
