"""Hybrid retrieval latency at scale: p50/p95 of one search (query embedding + BM25 + vector search + fusion)
over a collection of N chunks (default 100,000).

Embedding 100,000 real chunks would take most of an hour on 2 cores, so the stored vectors are random unit
vectors and the texts are drawn from a 5,000-word vocabulary; search cost does not depend on what the vectors
mean. Queries are embedded with the real model, as in the app. Also reports the raw Chroma query alone.

    .venv/bin/python bench/rag_retrieval.py --chunks 100000 --queries 100
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()

    import numpy as np

    from app.paths import resolve_data_paths
    from app.services.container import enforce_offline
    from app.services.documents import build_documents
    from app.settings import load_settings
    from rag.chunking import Chunk
    from rag.manifest import FileRecord

    enforce_offline()
    rng = random.Random(11)
    vocabulary = [f"w{index}" for index in range(5000)] + ["lamp", "keeper", "tide", "harbour", "lens", "storm"]
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as scratch:
        settings = load_settings(home=Path(scratch))
        documents = build_documents(settings, resolve_data_paths(settings.home))
        info = documents.manifest.create("bench", documents.embedder.name)
        per_file = 1000
        started = time.perf_counter()
        for file_number in range(args.chunks // per_file):
            path = f"/bench/file-{file_number}.txt"
            chunks = [
                Chunk(f"{file_number}-{i}", " ".join(rng.choices(vocabulary, k=120)), i, None, None)
                for i in range(per_file)
            ]
            vectors = np.random.default_rng(file_number).normal(size=(per_file, 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            documents.store.replace_file(info.store_name, info.embedder, path, chunks, vectors)
            documents.manifest.record(info.name, FileRecord(path, str(file_number), 0, 0, "indexed", per_file, ""))
        print(f"built {args.chunks} chunks in {time.perf_counter() - started:.0f} s")
        started = time.perf_counter()
        documents.retriever.search("bench", "warm up the keyword index", top_k=5)
        print(f"first search (builds the keyword index) {time.perf_counter() - started:.1f} s")
        queries = [" ".join(rng.choices(vocabulary, k=rng.randint(2, 8))) + " lamp keeper" for _ in range(args.queries)]
        totals, embeds, raw = [], [], []
        for query in queries:
            started = time.perf_counter()
            result = documents.retriever.search("bench", query, top_k=5)
            totals.append((time.perf_counter() - started) * 1000)
            embeds.append(result.embed_ms)
            vector = documents.embedder.embed([query])[0]
            started = time.perf_counter()
            documents.store.nearest(info.store_name, info.embedder, vector, 40)
            raw.append((time.perf_counter() - started) * 1000)
        documents.close()
    print(f"{args.queries} queries over {args.chunks} chunks (ms)       p50      p95")
    for label, values in (
        ("hybrid search, total", totals),
        ("  of which query embedding", embeds),
        ("raw Chroma vector query alone", raw),
    ):
        print(f"{label:<44}{statistics.median(values):>8.1f}{percentile(values, 0.95):>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
