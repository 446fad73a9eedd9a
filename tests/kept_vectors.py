"""An embedder that keeps the vectors it computes in the account's cache, for the quality gates that index a whole
corpus on every run (the retrieval floor embeds about 3,400 passages of Debian's manuals: some 45 s of the
suite on a 2-core machine).

A vector is kept under the hash of its exact text, in a file named by the embedder and the model's own files, so
a change to chunking (other texts), to the model or to the runtime computes afresh what changed; what comes back
is what the same embedder computed for the same text on an earlier run. The gate still measures today's chunking,
search and ranking: only the arithmetic of embedding an unchanged text is not repeated."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.retrieval.embeddings import Embedder

CACHE = Path.home() / ".cache" / "hearth" / "test-vectors"


def model_identity(embedder: Embedder, model_dir: Path) -> str:
    """The embedder's name, its runtime and a digest of the model folder's files (names, sizes and the first and
    last MiB of each: enough to tell one set of weights from another without reading 90 MB every run)."""
    digest = hashlib.sha256(f"{embedder.name}\0{type(embedder).__qualname__}".encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(model_dir)}\0{size}\0".encode())
        with path.open("rb") as data:
            digest.update(data.read(1 << 20))
            data.seek(max(0, size - (1 << 20)))
            digest.update(data.read(1 << 20))
    return digest.hexdigest()[:24]


class KeptVectors:
    """``embedder`` with its vectors kept in ``CACHE/<identity>.sqlite``; every other call goes to it unchanged."""

    def __init__(self, embedder: Embedder, identity: str, folder: Path = CACHE) -> None:
        self._embedder = embedder
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.Lock()  # one connection, used by whichever thread embeds
        self._db = sqlite3.connect(folder / f"{identity}.sqlite", check_same_thread=False, timeout=60)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self.computed = 0  # texts embedded by the model on this run, for the tests of this helper
        self.kept = 0  # texts whose vector came from the cache

    @property
    def name(self) -> str:
        return self._embedder.name

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    @property
    def max_tokens(self) -> int:
        return self._embedder.max_tokens

    def count_tokens(self, text: str) -> int:
        return self._embedder.count_tokens(text)

    def tokenizer(self) -> Any:
        return self._embedder.tokenizer()

    def set_threads(self, threads: int) -> None:
        self._embedder.set_threads(threads)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest() for text in texts]
        with self._lock:
            found = dict(self._lookup(keys))
        missing = [i for i, key in enumerate(keys) if key not in found]
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if missing:
            computed = self._embedder.embed([texts[i] for i in missing])
            with self._lock, self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                    [(keys[i], computed[row].astype(np.float32).tobytes()) for row, i in enumerate(missing)],
                )
            vectors[missing] = computed
        for i, key in enumerate(keys):
            if key in found:
                vectors[i] = np.frombuffer(found[key], dtype=np.float32)
        self.computed += len(missing)
        self.kept += len(texts) - len(missing)
        return vectors

    def _lookup(self, keys: list[bytes]) -> list[tuple[bytes, bytes]]:
        rows: list[tuple[bytes, bytes]] = []
        for start in range(0, len(keys), 500):  # within SQLite's limit on parameters
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows += self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk).fetchall()
        whole = 4 * self.dimension  # a row cut short (a run killed mid-write) is computed again
        return [(key, vector) for key, vector in rows if len(vector) == whole]

    def close(self) -> None:
        self._db.close()
