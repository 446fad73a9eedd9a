"""Retrieval benchmarks: quality on a question set over real documents, or latency at scale.

Quality (hit@1, hit@k, MRR and the search time per question, median and p90), on the shared Debian corpus and the
question set shipped beside this script; with ``--reranker`` the same run also measures retrieval with that
cross-encoder folder, and with ``--baselines`` the plain ways Hearth must beat (``bench/retrieval_baselines.py``:
plain dense search over LangChain's 200-token passages, and each of Hearth's two rankings alone), so the
configurations are compared on one index, one machine and one load:

    bench/corpus/debian_docs.sh /tmp/debian-docs
    HEARTH_HOME=/tmp/bench-home .venv/bin/python bench/rag_retrieval.py \\
        --questions bench/data/debian-docs-retrieval.jsonl --docs /tmp/debian-docs [--reranker DIR] [--baselines]

The documents are indexed into collection ``--collection`` of ``HEARTH_HOME`` first (files already indexed and
unchanged are kept). The first search of a configuration loads its models and builds the keyword index; it is
made before timing starts, so the times are those of a warm application.

Latency at scale: p50/p95 of one search (query embedding + BM25 + vector search + fusion) over a collection of N
chunks (default 100,000). Embedding 100,000 real chunks would take most of an hour on 2 cores, so the stored
vectors are random unit vectors and the texts are drawn from a 5,000-word vocabulary; search cost does not depend
on what the vectors mean. Queries are embedded with the real model, as in the app. Also reports the raw Chroma
query alone.

    .venv/bin/python bench/rag_retrieval.py --chunks 100000 --queries 100
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--questions", type=Path, help="JSON Lines question set: measure retrieval quality")
    parser.add_argument("--docs", type=Path, help="folder of documents the questions are about (quality mode)")
    parser.add_argument("--collection", default="bench-retrieval", help="collection to index --docs into")
    parser.add_argument("--reranker", type=Path, help="a cross-encoder folder to compare against no reranking")
    parser.add_argument(
        "--baselines", action="store_true", help="also measure plain dense search, dense only and keyword only"
    )
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=100_000, help="collection size for the latency-at-scale mode")
    parser.add_argument("--queries", type=int, default=100, help="queries for the latency-at-scale mode")
    args = parser.parse_args()
    if args.questions is not None:
        if args.docs is None:
            parser.error("--questions needs --docs, the folder the questions are about")
        return measure_quality(args.questions, args.docs, args.collection, args.reranker, args.top_k, args.baselines)
    return measure_scale(args.chunks, args.queries)


def measure_quality(
    questions_path: Path, docs: Path, collection: str, reranker: Path | None, top_k: int, baselines: bool = False
) -> int:
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.container import enforce_offline
    from app.services.library.documents import build_documents
    from app.settings import load_settings
    from rag.evaluation import Retrieved, evaluate, read_questions
    from rag.retrieval.retriever import Retriever

    enforce_offline()
    questions = read_questions(questions_path)
    settings = load_settings()
    documents = build_documents(settings, ensure_data_dir(resolve_data_paths(settings.home)))
    try:
        info = documents.ingestor.open_collection(collection)
        started = time.perf_counter()
        for _ in documents.ingestor.ingest([docs], info.name):
            pass
        print(f"indexed {docs} into {info.name!r} in {time.perf_counter() - started:.0f} s ({settings.home})")
        configurations: list[tuple[str, Callable[[str], list[Retrieved]]]] = []
        models: list[tuple[str, Any]] = [("hybrid (no reranker)", None)]
        if reranker is not None:
            from rag.retrieval.rerank import CrossEncoderReranker

            models.append((f"hybrid + {reranker.name}", CrossEncoderReranker(reranker)))
        steps: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)
        for label, model in models:
            retriever = Retriever(documents.manifest, documents.store, documents.embedder, model)

            def hybrid(question: str, retriever: Retriever = retriever, label: str = label) -> list[Retrieved]:
                found = retriever.search(info.name, question, top_k=top_k)
                steps[label].append((found.embed_ms, found.keyword_ms, found.vector_ms, found.fusion_ms))
                return [Retrieved(Path(p.chunk.path).name, p.chunk.page, p.chunk.text) for p in found.passages]

            configurations.append((label, hybrid))
        if baselines:
            from retrieval_baselines import dense_only, keyword_only, plain_dense

            configurations.append(("dense only (Hearth's passages)", dense_only(documents, info.name, top_k)))
            configurations.append(("keyword only (Hearth's passages)", keyword_only(documents, info.name, top_k)))
            started = time.perf_counter()
            configurations.append(("plain dense (LangChain 200/30)", plain_dense(docs, documents.embedder, top_k)))
            print(f"indexed {docs} the plain way in {time.perf_counter() - started:.0f} s")
        print(f"{len(questions)} questions, top {top_k}")
        print(f"{'configuration':<36}{'hit@1':>7}{f'hit@{top_k}':>7}{'MRR':>7}{'median ms':>11}{'p90 ms':>8}")
        for label, search in configurations:
            search("warm up: load the models and build the keyword index")
            steps.pop(label, None)
            report = evaluate(questions, search, top_k)
            print(
                f"{label:<36}{report.hit_at_1:>7.3f}{report.hit_at_k:>7.3f}{report.mrr:>7.3f}"
                f"{report.latency_percentile_ms(0.5):>11.0f}{report.latency_percentile_ms(0.9):>8.0f}"
            )
            by_kind: dict[str, list[int | None]] = defaultdict(list)
            for result in report.results:
                by_kind[Path(result.question.gold_file).suffix.lstrip(".")].append(result.rank)
            print(
                "    hit@1 by kind: "
                + ", ".join(
                    f"{kind} {sum(1 for r in ranks if r == 1)}/{len(ranks)}" for kind, ranks in sorted(by_kind.items())
                )
            )
        for label, timings in steps.items():
            medians = [statistics.median(t[i] for t in timings) for i in range(4)]
            print(
                f"{label}: median ms per step: embed the question {medians[0]:.1f}, keyword ranking and exact terms "
                f"{medians[1]:.1f}, vector ranking {medians[2]:.1f}, fusion, near-duplicates and any reranker "
                f"{medians[3]:.1f}"
            )
    finally:
        documents.close()
    return 0


def measure_scale(chunk_count: int, query_count: int) -> int:
    import numpy as np

    from app.paths import resolve_data_paths
    from app.services.container import enforce_offline
    from app.services.library.documents import build_documents
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
        for file_number in range(chunk_count // per_file):
            path = f"/bench/file-{file_number}.txt"
            chunks = [
                Chunk(f"{file_number}-{i}", " ".join(rng.choices(vocabulary, k=120)), i, None, None)
                for i in range(per_file)
            ]
            vectors = np.random.default_rng(file_number).normal(size=(per_file, 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            documents.store.replace_file(info.store_name, info.embedder, path, chunks, vectors)
            documents.manifest.record(info.name, FileRecord(path, str(file_number), 0, 0, "indexed", per_file, ""))
        print(f"built {chunk_count} chunks in {time.perf_counter() - started:.0f} s")
        started = time.perf_counter()
        documents.retriever.search("bench", "warm up the keyword index", top_k=5)
        print(f"first search (builds the keyword index) {time.perf_counter() - started:.1f} s")
        queries = [" ".join(rng.choices(vocabulary, k=rng.randint(2, 8))) + " lamp keeper" for _ in range(query_count)]
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
    print(f"{query_count} queries over {chunk_count} chunks (ms)       p50      p95")
    for label, values in (
        ("hybrid search, total", totals),
        ("  of which query embedding", embeds),
        ("raw Chroma vector query alone", raw),
    ):
        print(f"{label:<44}{statistics.median(values):>8.1f}{percentile(values, 0.95):>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
