"""Whether a language model can tell which of the passages found answers a question better than the ranking does:
each of the first DEPTH passages Hearth's search finds is scored by how likely the model finds the question after
it (the mean log-probability of the question's tokens, read after "Passage: … A question this passage answers:"),
and the passages are put in that order. Printed, for each half: how often the first passage, and the first two,
hold the expected answer, in the ranking's order and in the model's; and how long scoring took a question.

Why: the model reading only the passages that hold the answer, among the first 8 found, answered 32/50 and 39/50
right against 30 and 29 with the first 3 (``docs/documents.md``), so a way to choose the passage to read is worth
finding. A model's likelihood of the question is a known way to rerank without training; with Hearth's kept
passage caches only the question's tokens would need reading per passage. This measures the choice alone, with any
GGUF as the scorer (the embedded SmolLM2-135M is quick enough to try on a 2-core CPU), and the passages read whole
here (no kept caches): its time is an upper bound.

    HEARTH_HOME=~/.cache/hearth-bench/uw-home .venv/bin/python bench/question_likelihood.py \\
        bench/data/user-words-answers.jsonl -c uw --model MODEL.gguf --json FILE
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

DEPTH = 8
PROMPT = "Passage: {passage}\n\nA question this passage answers:"
PASSAGE_TOKENS = 384  # a passage is cut to this many tokens, so that every prompt fits the context


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("questions", type=Path)
    parser.add_argument("-c", "--collection", required=True)
    parser.add_argument("--model", type=Path, required=True, help="the GGUF that scores")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    from app.cli.eval import split_part
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.container import enforce_offline
    from app.services.library.documents import build_documents
    from app.settings import load_settings
    from backends.llamacpp.buffers import open_llama  # the product's buffer rule (AMX CPUs)
    from rag.answer_eval import holds_expected, read_answer_questions

    enforce_offline()
    questions = read_answer_questions(args.questions)
    settings = load_settings()
    documents = build_documents(settings, ensure_data_dir(resolve_data_paths(settings.home)))
    scorer = open_llama(model_path=str(args.model), n_ctx=1024, n_threads=2, logits_all=True, verbose=False)
    figures: dict[str, Any] = {"command": "bench/question_likelihood.py " + " ".join(sys.argv[1:]), "parts": {}}
    try:
        for part in ("tuning", "held-out"):
            rows = []
            for question in split_part(questions, args.questions, part):
                found = documents.retriever.search(args.collection, question.question, top_k=DEPTH).passages
                texts = [p.chunk.text for p in found]
                started = time.perf_counter()
                scores = [question_log_probability(scorer, text, question.question) for text in texts]
                took = time.perf_counter() - started
                order = sorted(range(len(texts)), key=lambda i: -scores[i])
                holds = [holds_expected(text, question.expected) for text in texts]
                rows.append(
                    {
                        "line": question.line,
                        "holds": holds,
                        "model_order": order,
                        "scores": [round(s, 3) for s in scores],
                        "seconds": round(took, 2),
                    }
                )
            figures["parts"][part] = summary(rows)
            figures["parts"][part]["rows"] = rows
            c = figures["parts"][part]
            print(
                f"{part:8}  first passage holds the answer: ranking {c['ranking_first']}/{c['questions']}, "
                f"model {c['model_first']}/{c['questions']};  first two: ranking {c['ranking_two']}, model "
                f"{c['model_two']};  any of {DEPTH}: {c['any']};  {c['seconds_median']:.1f} s a question (median)"
            )
    finally:
        documents.close()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


def question_log_probability(scorer: Any, passage: str, question: str) -> float:
    """The mean log-probability of ``question``'s tokens after the passage's prompt."""
    cut = scorer.detokenize(scorer.tokenize(passage.encode(), add_bos=False)[:PASSAGE_TOKENS]).decode(errors="ignore")
    head = scorer.tokenize(PROMPT.format(passage=cut).encode(), add_bos=True)
    asked = scorer.tokenize((" " + question).encode(), add_bos=False)
    scorer.reset()
    scorer.eval(head + asked)
    logits = np.asarray(scorer.scores[len(head) - 1 : len(head) + len(asked) - 1], dtype=np.float64)
    top = logits.max(axis=1, keepdims=True)
    log_probs = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
    return float(np.mean(log_probs[np.arange(len(asked)), asked]))


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = sorted(r["seconds"] for r in rows)
    return {
        "questions": len(rows),
        "ranking_first": sum(1 for r in rows if r["holds"][:1] == [True]),
        "model_first": sum(1 for r in rows if r["holds"] and r["holds"][r["model_order"][0]]),
        "ranking_two": sum(1 for r in rows if any(r["holds"][:2])),
        "model_two": sum(1 for r in rows if any(r["holds"][i] for i in r["model_order"][:2])),
        "any": sum(1 for r in rows if any(r["holds"])),
        "seconds_median": seconds[len(seconds) // 2] if seconds else 0.0,
    }


if __name__ == "__main__":
    raise SystemExit(main())
