"""Ingestion throughput, end to end, against raw SentenceTransformer.encode on the same chunks, in one run.

Writes a folder of Markdown and text files, ingests it with Hearth (load, chunk, embed, store, manifest) into a
throwaway data folder, then encodes exactly the chunks Hearth produced with the bare model at the same batch
size. Reports chunks/s for both and the ratio.

    .venv/bin/python bench/rag_ingest.py --files 60
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

WORDS = [
    "lamp",
    "keeper",
    "tide",
    "harbour",
    "beam",
    "lens",
    "storm",
    "ship",
    "rock",
    "light",
    "night",
    "wind",
    "wave",
    "chart",
    "buoy",
    "signal",
    "tower",
    "stairs",
    "fog",
    "horn",
    "coast",
    "cliff",
    "sea",
    "current",
    "anchor",
    "mooring",
    "pier",
    "boat",
    "sail",
    "rope",
    "engine",
    "clockwork",
    "wick",
    "oil",
    "glass",
]


def write_corpus(folder: Path, files: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for number in range(files):
        paragraphs = []
        for _ in range(12):
            sentence_count = rng.randint(3, 7)
            sentences = [
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16))).capitalize() + "."
                for _ in range(sentence_count)
            ]
            paragraphs.append(" ".join(sentences))
        suffix = ".md" if number % 2 else ".txt"
        body = "\n\n".join(paragraphs)
        if suffix == ".md":
            body = f"# Log {number}\n\n{body}"
        (folder / f"log-{number:03d}{suffix}").write_text(body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=60)
    args = parser.parse_args()

    from app.paths import resolve_data_paths
    from app.services.container import enforce_offline
    from app.services.library.documents import build_documents
    from app.settings import load_settings
    from rag.ingest import FileOutcome
    from rag.retrieval.embeddings import SentenceTransformerEmbedder

    enforce_offline()
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as scratch:
        corpus = Path(scratch) / "corpus"
        corpus.mkdir()
        write_corpus(corpus, args.files)
        settings = load_settings(home=Path(scratch) / "home")
        paths = resolve_data_paths(settings.home)
        paths.root.mkdir(parents=True)
        documents = build_documents(settings, paths)
        documents.embedder.embed(["warm up"])  # both sides start with a loaded model
        started = time.perf_counter()
        outcomes = [e for e in documents.ingestor.ingest([corpus], "bench") if isinstance(e, FileOutcome)]
        hearth_s = time.perf_counter() - started
        chunks = sum(o.chunks for o in outcomes)
        info = documents.manifest.get("bench")
        texts = [c.text for c in documents.store.all_chunks(info.store_name, info.embedder)]
        embedder = documents.embedder
        assert isinstance(embedder, SentenceTransformerEmbedder)
        started = time.perf_counter()
        embedder.model().encode(
            texts, batch_size=embedder.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        raw_s = time.perf_counter() - started
        documents.close()
    hearth_rate, raw_rate = chunks / hearth_s, len(texts) / raw_s
    print(f"{args.files} files, {chunks} chunks")
    print(f"{'':<34}{'chunks/s':>10}")
    print(f"{'raw SentenceTransformer.encode':<34}{raw_rate:>10.1f}")
    print(f"{'Hearth ingestion, end to end':<34}{hearth_rate:>10.1f}")
    print(f"{'Hearth / raw':<34}{hearth_rate / raw_rate:>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
