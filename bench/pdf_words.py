"""How many of Hearth's passages from PDFs still hold a word broken at a line end ("Environ- ment"), per file.

    .venv/bin/python bench/pdf_words.py /usr/share/doc/bash-doc/bashref.pdf /usr/share/R/doc/manual/R-intro.pdf \
        /usr/share/R/doc/manual/R-lang.pdf /usr/share/doc/glpk-doc/glpk.pdf

Each PDF is read and cut into passages exactly as `hearth ingest` does (the real reader, cleaning and chunker with
MiniLM's tokenizer); a passage counts as broken if it holds one or more breaks (letters, a hyphen, a line break or
spaces, a lowercase letter, not before "and"/"or"). Prints the share per file and overall, and a few examples.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rag.chunking import chunk_sections
from rag.reading.loaders import load_file
from rag.reading.pdf_words import _BROKEN, broken_word_count
from rag.retrieval.embeddings import default_embedder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pdfs", nargs="+", type=Path)
    parser.add_argument("--examples", type=int, default=3, help="broken passages to show per file")
    args = parser.parse_args()
    embedder = default_embedder()
    total = broken = 0
    for pdf in args.pdfs:
        sections = load_file(pdf)
        chunks = chunk_sections(sections, embedder.tokenizer(), "bench", embedder.max_tokens)
        bad = [c for c in chunks if broken_word_count(c.text)]
        total += len(chunks)
        broken += len(bad)
        print(f"{pdf.name}: {len(bad)} of {len(chunks)} passages hold a broken word ({len(bad) / len(chunks):.1%})")
        for chunk in bad[: args.examples]:
            match = _BROKEN.search(chunk.text)
            assert match is not None
            around = chunk.text[max(0, match.start() - 30) : match.end() + 10].replace("\n", "⏎")
            print(f"    page {chunk.page}: …{around}…")
    print(f"all: {broken} of {total} passages ({broken / max(total, 1):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
