"""Pick passages at random from a corpus, as Hearth chunks it, for people to write questions about in their own
words (the "user's own words" set). The draw is fixed by --seed, so the same corpus gives the same
passages; passages of fewer than --min-chars characters (a heading, a page footer) are drawn past, except CSV rows.

Usage: .venv/bin/python bench/pick_passages.py CORPUS_DIR --per-file 12 --out bench/data/user-words-passages.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.chunking import chunk_sections  # noqa: E402
from rag.reading.loaders import load_file  # noqa: E402
from rag.retrieval.embeddings import default_embedder  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--per-file", type=int, default=12)
    parser.add_argument("--min-chars", type=int, default=300)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    embedder = default_embedder()
    rows = []
    for path in sorted(p for p in args.corpus.iterdir() if p.is_file()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        chunks = chunk_sections(load_file(path), embedder.tokenizer(), digest, embedder.max_tokens)
        minimum = 0 if path.suffix == ".csv" else args.min_chars  # a CSV row is a whole passage, however short
        usable = [c for c in chunks if len(c.text) >= minimum]
        draw = random.Random(f"{args.seed}:{path.name}").sample(usable, min(args.per_file, len(usable)))
        for chunk in sorted(draw, key=lambda c: c.index):
            rows.append(
                {"id": f"{path.name}#{chunk.index}", "source": path.name, "page": chunk.page, "text": chunk.text}
            )
        print(f"{path.name}: {len(chunks)} chunks, {len(usable)} usable, {len(draw)} drawn", file=sys.stderr)
    args.out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
