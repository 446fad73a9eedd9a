"""Choose how Hearth fuses its rankings (``rag.retrieval.fusion.FusionPolicy``) on the tuning half of every question
set, and report the held-out half.

Each set is a question file with its split file beside it (``NAME.split.json``: line numbers of the tuning and the
held-out questions) and the folder of documents it is about. The documents are indexed once into ``HEARTH_HOME``
(files already indexed and unchanged are kept); then every question's three rankings (keyword, vector with cosine
similarities, exact terms) are fetched once, and each candidate policy only re-fuses them, so a grid of hundreds of
policies takes a minute or two. The policy kept is, on the tuning halves, first the one that falls least behind
the better of the two rankings alone (dense only, keyword only) on any set, in hit@1 or hit@5 (a fusion that loses
to one of its own inputs is the failure to avoid), then the one with the most questions right (hit@1, then hit@5,
over all sets together); ties keep the current default. Printed per set and part: plain reciprocal rank fusion, the
current default, the chosen policy, and the two rankings alone (dense only, keyword only), which Hearth must match
or beat, and how often the chosen policy trusted a confident vector hit (and how often that hit was right).

    bench/corpus/debian_docs.sh /tmp/debian-docs && bench/corpus/debian_manuals.sh /tmp/debian-manuals
    HEARTH_HOME=/tmp/bench-home .venv/bin/python bench/fusion_tuning.py \\
        --set bench/data/debian-docs-retrieval.jsonl=/tmp/debian-docs \\
        --set bench/data/debian-manuals-retrieval.jsonl=/tmp/debian-manuals
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

TOP_K = 5


@dataclass(frozen=True)
class QuestionSet:
    name: str
    parts: dict[str, list[Any]]  # part -> [(Question, Candidates)]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--set", action="append", required=True, metavar="QUESTIONS=DOCS", help="a set and its folder")
    args = parser.parse_args()
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.container import enforce_offline
    from app.services.library.documents import build_documents
    from app.settings import load_settings

    enforce_offline()
    settings = load_settings()
    documents = build_documents(settings, ensure_data_dir(resolve_data_paths(settings.home)))
    try:
        sets = [load_set(documents, *spec.split("=", 1)) for spec in args.set]
    finally:
        documents.close()
    report(sets)
    return 0


def load_set(documents: Any, questions_file: str, docs: str) -> QuestionSet:
    from app.cli.eval import split_part
    from rag.evaluation import read_questions

    questions_path = Path(questions_file)
    questions = read_questions(questions_path)
    collection = f"tuning-{questions_path.stem}"
    info = documents.ingestor.open_collection(collection)
    started = time.perf_counter()
    for _ in documents.ingestor.ingest([Path(docs)], info.name):
        pass
    print(f"{questions_path.name}: indexed {docs} in {time.perf_counter() - started:.0f} s")
    retriever = documents.retriever
    retriever.candidates(info.name, "warm up: build the keyword index")
    parts = {}
    for part in ("tuning", "held-out"):
        chosen = split_part(questions, questions_path, part)
        parts[part] = [(q, retriever.candidates(info.name, q.question)) for q in chosen]
    return QuestionSet(questions_path.stem, parts)


def ranks(pairs: Sequence[Any], search: Callable[[Any], list[Any]]) -> list[int | None]:
    from rag.evaluation import Retrieved, score

    found = []
    for question, candidates in pairs:
        chunks = search(candidates)[:TOP_K]
        retrieved = [Retrieved(Path(c.path).name, c.page, c.text) for c in chunks]
        found.append(score(question, retrieved).rank)
    return found


def fused(policy: Any) -> Callable[[Any], list[Any]]:
    from rag.retrieval.fusion import drop_near_duplicates
    from rag.retrieval.retriever import Retriever

    def search(candidates: Any) -> list[Any]:
        passages = drop_near_duplicates(Retriever.rank(candidates, policy), lambda p: p.chunk.text, limit=TOP_K)
        return [p.chunk for p in passages]

    return search


def hits(found: Sequence[int | None]) -> tuple[int, int]:
    return sum(1 for r in found if r == 1), sum(1 for r in found if r is not None)


def policies(default: Any) -> list[Any]:
    grid = [default]
    for keyword, vector, k, confident, margin in itertools.product(
        (0.75, 1.0, 1.25, 1.5, 2.0),
        (1.0, 1.25, 1.5, 2.0),
        (10, 30, 60),
        (None, 0.5, 0.55, 0.6, 0.65, 0.7),
        (0.0, 0.03, 0.06, 0.1),
    ):
        if confident is None and margin:
            continue
        grid.append(
            replace(
                default,
                keyword_weight=keyword,
                vector_weight=vector,
                k=k,
                confident_similarity=confident,
                confident_margin=margin,
            )
        )
    return grid


def report(sets: Sequence[QuestionSet]) -> None:
    from rag.retrieval.fusion import FusionPolicy
    from rag.retrieval.retriever import DEFAULT_POLICY

    plain = FusionPolicy()  # plain reciprocal rank fusion (k 60, equal weights), as before any tuning

    alone = [
        (
            hits(ranks(s.parts["tuning"], lambda c: list(c.vector))),
            hits(ranks(s.parts["tuning"], lambda c: list(c.keyword))),
        )
        for s in sets
    ]

    def tuning_score(policy: Any) -> tuple[int, int, int]:
        totals = [hits(ranks(s.parts["tuning"], fused(policy))) for s in sets]
        behind = min(
            min(total[0] - max(dense[0], keyword[0]), total[1] - max(dense[1], keyword[1]))
            for total, (dense, keyword) in zip(totals, alone, strict=True)
        )
        return min(0, behind), sum(t[0] for t in totals), sum(t[1] for t in totals)

    grid = policies(DEFAULT_POLICY)
    started = time.perf_counter()
    scored = [(tuning_score(p), -i, p) for i, p in enumerate(grid)]
    best = max(scored, key=lambda item: (item[0], item[1]))[2]
    print(f"{len(grid)} policies tried on the tuning halves in {time.perf_counter() - started:.0f} s")
    print(f"default: {DEFAULT_POLICY}")
    print(f"chosen:  {best}")
    configurations: list[tuple[str, Callable[[Any], list[Any]]]] = [
        ("hybrid, plain RRF", fused(plain)),
        ("hybrid, default policy", fused(DEFAULT_POLICY)),
        ("hybrid, chosen policy", fused(best)),
        ("dense only", lambda c: list(c.vector)),
        ("keyword only", lambda c: list(c.keyword)),
    ]
    for question_set in sets:
        for part, pairs in question_set.parts.items():
            print(f"\n{question_set.name}, {part} ({len(pairs)} questions)   hit@1   hit@{TOP_K}")
            for label, search in configurations:
                one, five = hits(ranks(pairs, search))
                print(f"  {label:<26}{one:>4} ({one / len(pairs):.3f}){five:>4} ({five / len(pairs):.3f})")
            confident = [(q, c) for q, c in pairs if best.confident(c.vector_similarity)]
            right = sum(1 for r in ranks(confident, lambda c: list(c.vector[:1])) if r == 1)
            print(f"  the chosen policy finds the vector hit confident for {len(confident)}; it is right for {right}")


if __name__ == "__main__":
    raise SystemExit(main())
