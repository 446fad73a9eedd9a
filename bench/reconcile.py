"""What reconciling a collection costs (done on every ingestion run and when the page starts), beside what the
page's start-up already spends on the same collection (building its keyword index).

Builds a collection of N chunks with random vectors in a throwaway folder (real Chroma, real manifest; no embedding
model needed), then times, median of several runs: reconciling it when it is consistent (one count each side),
reconciling it when one file's chunks are leftovers (everything is read, the leftovers removed), and building the
keyword index.

    .venv/bin/python bench/reconcile.py --chunks 5000 --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rag.chunking import Chunk
from rag.ingest import Ingestor
from rag.manifest import FileRecord, Manifest
from rag.retrieval.retriever import Retriever
from rag.store import VectorStore

CHUNKS_PER_FILE = 20
DIMENSION = 384


class _NoEmbedder:
    """Reconciling and keyword indexing never embed; the retriever and ingestor only need the name."""

    name = "bench-random"


def build(root: Path, chunks: int) -> tuple[Manifest, VectorStore, Ingestor]:
    manifest = Manifest(root / "index.db")
    store = VectorStore(root / "vectors")
    info = manifest.create("bench", _NoEmbedder.name)
    rng = np.random.default_rng(0)
    for number in range(chunks // CHUNKS_PER_FILE):
        path = f"/bench/file{number:05d}.txt"
        pieces = [
            Chunk(f"{number}-{i}", f"file {number} passage {i} " + "words " * 40, i, None, None)
            for i in range(CHUNKS_PER_FILE)
        ]
        vectors = rng.standard_normal((CHUNKS_PER_FILE, DIMENSION)).astype(np.float32)
        store.replace_file(info.store_name, info.embedder, path, pieces, vectors)
        manifest.record(info.name, FileRecord(path, f"{number:064d}", 1, 1, "indexed", CHUNKS_PER_FILE, ""))
    embedder = _NoEmbedder()
    ingestor = Ingestor(manifest, store, embedder, max_file_bytes=1 << 20)  # type: ignore[arg-type]
    return manifest, store, ingestor


def median_ms(action: Callable[[], object], runs: int, before: Callable[[], object] = lambda: None) -> float:
    times = []
    for _ in range(runs):
        before()
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hearth-bench-reconcile-") as folder:
        manifest, store, ingestor = build(Path(folder), args.chunks)
        info = manifest.get("bench")
        rng = np.random.default_rng(1)

        def leave_leftovers() -> None:
            pieces = [Chunk(f"left-{i}", f"leftover {i}", i, None, None) for i in range(CHUNKS_PER_FILE)]
            vectors = rng.standard_normal((CHUNKS_PER_FILE, DIMENSION)).astype(np.float32)
            store.replace_file(info.store_name, info.embedder, "/bench/killed.txt", pieces, vectors)

        def keyword_index() -> object:
            return Retriever(manifest, store, _NoEmbedder()).keyword_index(info)  # type: ignore[arg-type]  # cold

        consistent = median_ms(lambda: ingestor.reconcile(info), args.runs)
        with_leftovers = median_ms(lambda: ingestor.reconcile(info), args.runs, before=leave_leftovers)
        keyword = median_ms(keyword_index, args.runs)
        ingestor.close()
        manifest.close()
    print(f"collection of {args.chunks} chunks, median of {args.runs} runs")
    print(f"reconcile, consistent (one count each side): {consistent:8.1f} ms")
    print(f"reconcile, {CHUNKS_PER_FILE} leftover chunks removed:      {with_leftovers:8.1f} ms")
    print(f"keyword index build (start-up does it anyway): {keyword:8.1f} ms")


if __name__ == "__main__":
    main()
