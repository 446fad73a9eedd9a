"""What refreshing the keyword index costs against building it from the text, at a collection's size.

    .venv/bin/python bench/bm25_build.py --home ~/.local/share/hearth-eval --passages 100000 \
        --out bench/data/bm25-build.txt

Reads the passages of the first collection in ``--home``, a data folder of your own (the Debian documentation, as
the evaluations index it; keep it out of /tmp, where another account can replace it),
repeats them to ``--passages``, then times, ``--runs`` times each: building the index from the texts (tokenizing
every passage: what a change cost before the index kept its terms), tokenizing alone, and building from the kept
terms (what a refresh costs after a change, besides reading and tokenizing the changed files' passages).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from rag.chunking import searchable_text
    from rag.retrieval.bm25 import BM25Index, Vocabulary
    from rag.store import VectorStore

    store = VectorStore(args.home / "vectors")
    name = store.store_names()[0]
    chunks = store.all_chunks(name, "all-MiniLM-L6-v2")
    texts = [searchable_text(c.text, c.section) for c in chunks]
    texts = (texts * (args.passages // len(texts) + 1))[: args.passages]
    timings: dict[str, list[float]] = {"from the text": [], "tokenizing alone": [], "from kept terms": []}
    for _ in range(args.runs):
        began = time.perf_counter()
        BM25Index(texts)
        timings["from the text"].append(time.perf_counter() - began)
        began = time.perf_counter()
        vocabulary = Vocabulary()
        terms = [vocabulary.terms(text) for text in texts]
        timings["tokenizing alone"].append(time.perf_counter() - began)
        began = time.perf_counter()
        BM25Index.from_terms(terms, vocabulary)
        timings["from kept terms"].append(time.perf_counter() - began)
    lines = [
        f"# .venv/bin/python bench/bm25_build.py {' '.join(argv if argv is not None else sys.argv[1:])}",
        f"{args.passages} passages ({len(chunks)} real ones of {name}, repeated), {args.runs} runs; seconds",
        *(
            f"{what:<18} median {statistics.median(v):6.2f}  runs {', '.join(f'{x:.2f}' for x in v)}"
            for what, v in timings.items()
        ),
    ]
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
