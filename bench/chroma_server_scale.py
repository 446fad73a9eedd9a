"""Collections on a Chroma server against the data folder's, at 100,000 passages.

    bench/corpus/debian_docs.sh /root/debian-corpus    # once
    .venv/bin/python bench/chroma_server_scale.py --docs /root/debian-corpus --passages 100000 \\
        --out bench/data/chroma-server-scale.json

Real text: the Debian documentation is indexed once with Hearth (read, split, embedded by the embedded MiniLM) into a
scratch data folder. Its passages, with their vectors, are then copied over and over with distinct ids and paths
(each copy's vectors moved by a little noise, so the vector index holds no exact duplicates) up to ``--passages``,
and written file by file through Hearth's store as ingestion writes them (``replace_file``, then the file's record)
into the data folder's embedded store and into a collection on a `chroma run` this script starts on loopback: the
same passages, the same order, each file written to one and then the other (the order alternating), so drift on
the machine reaches both alike. Embedding is left out of the ingest rate: it is the same work for both, and for
100,000 passages it would take most of an hour on this machine.

Then every question of the Debian retrieval set, on each store in turn (the order alternating per question): the
whole search as the app runs it (query embedding, keyword ranking, vector query, fusion), and its keyword and
vector parts, p50 and p95 in milliseconds; the first search's time (which reads every passage from the store to
build the keyword index), and that of the first search after one more file is added (which reads that file and
builds the index again from the terms it kept); and memory: this process's resident set as each store is filled and
first searched (the embedded store and both keyword indexes live in it), and the server process's resident set and
peak.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
COLLECTION = "debian at scale"
NOISE = 0.02  # how far a copy's vectors move (then normalised again): near the original, never equal to it


def resident_mib(pid: int | str = "self") -> tuple[float, float]:
    """(resident set, its peak) of a process in MiB, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p95": percentile(values, 0.95), "n": len(values)}


def source_passages(docs: Path, scratch: Path) -> list[tuple[str, list[Any], np.ndarray]]:
    """The Debian documents indexed by Hearth: (path, chunks in order, their vectors) per file."""
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.library.documents import build_documents
    from app.settings import load_settings
    from rag.chunking import Chunk

    settings = load_settings(home=scratch)
    documents = build_documents(settings, ensure_data_dir(resolve_data_paths(scratch)))
    try:
        list(documents.ingestor.ingest([docs], "source"))
        info = documents.manifest.get("source")
        by_path: dict[str, list[tuple[Chunk, np.ndarray]]] = {}
        for page in documents.store.pages(info.store_name, info.embedder):
            for chunk_id, vector, text, meta in zip(page.ids, page.vectors, page.texts, page.metadatas, strict=True):
                chunk = Chunk(chunk_id, text, int(meta["index"]), meta.get("page"), meta.get("section") or None)
                by_path.setdefault(str(meta["path"]), []).append((chunk, vector))
    finally:
        documents.close()
    files = []
    for path, pairs in sorted(by_path.items()):
        pairs.sort(key=lambda pair: pair[0].index)
        files.append((path, [chunk for chunk, _ in pairs], np.stack([vector for _, vector in pairs])))
    return files


def copies(files: list[tuple[str, list[Any], np.ndarray]], total: int) -> Iterator[tuple[str, list[Any], np.ndarray]]:
    """The source files copied over and over, with distinct ids and paths and moved vectors, ``total`` passages."""
    from rag.chunking import Chunk

    rng = np.random.default_rng(40)
    written, copy = 0, 0
    while written < total:
        for path, chunks, vectors in files:
            take = min(len(chunks), total - written)
            if take <= 0:
                return
            moved = vectors[:take] + rng.normal(scale=NOISE, size=vectors[:take].shape).astype(np.float32)
            moved /= np.linalg.norm(moved, axis=1, keepdims=True)
            renamed = [Chunk(f"{c.id}~{copy}", c.text, c.index, c.page, c.section) for c in chunks[:take]]
            yield f"{path}#copy{copy}", renamed, moved
            written += take
        copy += 1


def questions(path: Path) -> list[str]:
    return [json.loads(line)["question"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--docs", type=Path, required=True, help="the Debian documentation folder")
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--questions", type=Path, default=ROOT / "bench" / "data" / "debian-docs-retrieval.jsonl")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.container import enforce_offline
    from app.services.library.documents import build_documents
    from app.settings import load_settings
    from rag.manifest import FileRecord
    from tests.chroma_servers import start_chroma

    enforce_offline()
    with tempfile.TemporaryDirectory(prefix="hearth-scale-") as scratch_name:
        scratch = Path(scratch_name)
        started = time.perf_counter()
        files = source_passages(args.docs, scratch / "source")
        source_count = sum(len(chunks) for _, chunks, _ in files)
        print(
            f"{source_count} passages from {len(files)} files, read and embedded in "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
        server = start_chroma(scratch / "chroma-data")
        stores: dict[str, Any] = {}
        memory: dict[str, dict[str, float]] = {}
        try:
            for name, url in (("embedded", None), ("server", server.url)):
                home = scratch / name
                settings = load_settings(home=home, rag={"chroma_url": url})
                documents = build_documents(settings, ensure_data_dir(resolve_data_paths(home)))
                info = documents.manifest.create(COLLECTION, documents.embedder.name)
                stores[name] = (documents, info)
            write_s = {"embedded": 0.0, "server": 0.0}
            before = {"embedded": 0.0, "server": 0.0}
            written = 0
            for number, (path, chunks, vectors) in enumerate(copies(files, args.passages)):
                order = ("embedded", "server") if number % 2 == 0 else ("server", "embedded")
                for name in order:
                    documents, info = stores[name]
                    rss = resident_mib()[0]
                    began = time.perf_counter()
                    documents.store.replace_file(info.store_name, info.embedder, path, chunks, vectors)
                    documents.manifest.record(info.name, FileRecord(path, path, 0, 0, "indexed", len(chunks), ""))
                    write_s[name] += time.perf_counter() - began
                    before[name] += resident_mib()[0] - rss
                written += len(chunks)
                if number % 50 == 0:
                    print(f"  {written} passages written", flush=True)
            for name in stores:
                memory[name] = {"client_rss_growth_while_writing_mib": before[name]}
            for documents, _ in stores.values():
                documents.embedder.embed(["load the embedding model before memory is measured"])
            first_search: dict[str, float] = {}
            for name in ("embedded", "server"):
                documents, _ = stores[name]
                rss = resident_mib()[0]
                began = time.perf_counter()
                documents.retriever.search(COLLECTION, "warm up: read every passage for the keyword index", top_k=5)
                first_search[name] = time.perf_counter() - began
                memory[name]["client_rss_growth_first_search_mib"] = resident_mib()[0] - rss
            asked = questions(args.questions)
            timings: dict[str, dict[str, list[float]]] = {
                name: {"total": [], "keyword": [], "vector": [], "embed": []} for name in stores
            }
            for number, question in enumerate(asked):
                order = ("embedded", "server") if number % 2 == 0 else ("server", "embedded")
                for name in order:
                    documents, _ = stores[name]
                    began = time.perf_counter()
                    result = documents.retriever.search(COLLECTION, question, top_k=5)
                    timings[name]["total"].append((time.perf_counter() - began) * 1000)
                    timings[name]["keyword"].append(result.keyword_ms)
                    timings[name]["vector"].append(result.vector_ms)
                    timings[name]["embed"].append(result.embed_ms)
            # One more file, as a new file is added to a collection in use: the next search refreshes the keyword
            # index (reads that file, tokenizes its passages, builds the index from the terms kept).
            after_one_file: dict[str, float] = {}
            path, chunks, vectors = next(iter(copies(files, len(files[0][1]))))
            path = f"{path}-added"
            for name in ("embedded", "server"):
                documents, info = stores[name]
                documents.store.replace_file(info.store_name, info.embedder, path, chunks, vectors)
                documents.manifest.record(info.name, FileRecord(path, path, 0, 0, "indexed", len(chunks), ""))
                began = time.perf_counter()
                documents.retriever.search(COLLECTION, "a search right after one file was added", top_k=5)
                after_one_file[name] = time.perf_counter() - began
            server_rss, server_peak = resident_mib(server.process.pid)
            memory["server"] |= {"server_rss_mib": server_rss, "server_peak_mib": server_peak}
            memory["process"] = dict(zip(("rss_mib", "peak_mib"), resident_mib(), strict=True))
            counts = {
                name: documents.store.count(info.store_name, info.embedder)
                for name, (documents, info) in stores.items()
            }
        finally:
            for documents, _ in stores.values():
                documents.close()
            server.stop()
    rates = {name: written / seconds for name, seconds in write_s.items()}
    result = {
        "command": " ".join(["bench/chroma_server_scale.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "chroma": _chroma_version(),
        "source_passages": source_count,
        "passages": written,
        "stored": counts,
        "ingest_passages_per_s": rates,
        "ingest_ratio_server_to_embedded": rates["server"] / rates["embedded"],
        "first_search_s": first_search,
        "search_after_one_file_added_s": after_one_file,
        "questions": len(asked),
        "search_ms": {name: {part: summary(v) for part, v in parts.items()} for name, parts in timings.items()},
        "memory": memory,
    }
    lines = [
        f"{written} passages ({source_count} real ones copied), {len(asked)} questions",
        f"ingest (store writes, no embedding): embedded {rates['embedded']:.0f}/s, server {rates['server']:.0f}/s "
        f"(server {result['ingest_ratio_server_to_embedded']:.2f}x)",
        f"first search (reads every passage for the keyword index): embedded {first_search['embedded']:.1f} s, "
        f"server {first_search['server']:.1f} s",
        f"the first search after one more file: embedded {after_one_file['embedded']:.2f} s, "
        f"server {after_one_file['server']:.2f} s",
        "search, ms (p50 / p95)      embedded            server",
    ]
    for part in ("total", "keyword", "vector", "embed"):
        shown = [result["search_ms"][name][part] for name in ("embedded", "server")]
        lines.append(f"  {part:<24}" + "".join(f"{s['p50']:>8.1f} / {s['p95']:<8.1f}" for s in shown))
    lines.append(f"memory (MiB): {json.dumps(memory)}")
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def _chroma_version() -> str:
    import chromadb

    return str(chromadb.__version__)


if __name__ == "__main__":
    raise SystemExit(main())
