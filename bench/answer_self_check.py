"""Can the model tell its wrong answers from documents? (No confident wrong citation.)

For each answer of a ``hearth eval answers --output`` file, the conversation is rebuilt (Hearth's document rules,
the question with its passages as ``rag_question`` lays them out, the answer as kept) and the model is asked one
more short question; its first token's probabilities give P(yes) against P(no) (for ``found``: "found" against
"guessed"). Printed: for each check, how well P(yes) separates right answers from wrong ones (AUC) and how many of
each fall below a few thresholds. Files written before the output kept each source's text get their passages found
again in the collection (same index and question: the same first passages; ``same_passages`` says when not).

    HEARTH_HOME=~/.cache/hearth-bench/uw-home .venv/bin/python bench/answer_self_check.py \\
        bench/data/user-words-answers.tuning.qwen2.5-coder-1.5b.json -c uw --model MODEL.gguf --json F

It reads with llama-cpp-python directly (logits of every prompt token, for the probabilities), greedy, on the CPU.
The lexical rule (``--no-model``) is the product's own (``rag.support.unsupported``); the model's checks are
not used by the product.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

CHECKS = {
    "states": ("Does one of the passages above state that answer? Reply with yes or no only.", "yes", "no"),
    "correct": ("Is your answer correct according to the passages? Reply with yes or no only.", "yes", "no"),
    "found": (
        "Did you find the answer in the passages, or guess it? Reply with found or guessed only.",
        "found",
        "guess",
    ),
}
THRESHOLDS = (0.5, 0.7, 0.8, 0.85, 0.9)


def unheld_terms(answer: str, question: str, texts: list[str], min_terms: int) -> list[str]:
    """The product's lexical rule (``rag.support.unsupported``): the answer's distinctive terms when it cites a
    passage, has ``min_terms`` or more and no passage's text holds any of them, else []."""
    from rag.prompt import Source
    from rag.support import unsupported

    sources = [Source(n, "", None, None, t) for n, t in enumerate(texts, 1)]
    found = unsupported(answer, question, sources, min_terms)
    return list(found.terms) if found is not None else []


def passages_of(rows: list[dict[str, Any]], collection: str | None) -> list[tuple[list[str], bool]]:
    if all("text" in s for row in rows for s in row["sources"]):
        return [([s["text"] for s in row["sources"]], True) for row in rows]
    if collection is None:
        raise SystemExit("this file keeps no passage texts: name the collection its answers came from (-c)")
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.container import enforce_offline
    from app.services.library.documents import build_documents
    from app.settings import load_settings

    enforce_offline()
    settings = load_settings()
    documents = build_documents(settings, ensure_data_dir(resolve_data_paths(settings.home)))
    found = []
    try:
        info = documents.manifest.get(collection)
        for row in rows:
            passages = documents.retriever.search(info.name, row["question"], top_k=row["passages"]).passages
            same = [p.chunk.section for p in passages] == [s["section"] for s in row["sources"]]
            found.append(([p.chunk.text for p in passages], same))
    finally:
        documents.close()
    return found


def yes_share(llm: Any, messages: list[dict[str, str]], yes: str, no: str) -> float | None:
    reply = llm.create_chat_completion(messages, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=10)
    said = {"yes": 0.0, "no": 0.0}
    for top in reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]:
        word = top["token"].strip().lower()
        if word and yes.startswith(word):
            said["yes"] += math.exp(top["logprob"])
        elif word and no.startswith(word):
            said["no"] += math.exp(top["logprob"])
    total = said["yes"] + said["no"]
    return said["yes"] / total if total else None


def auc(right: list[float], wrong: list[float]) -> float:
    pairs = sum((a > b) + 0.5 * (a == b) for a in right for b in wrong)
    return pairs / (len(right) * len(wrong)) if right and wrong else math.nan


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("answers", type=Path, help="a hearth eval answers --output file")
    parser.add_argument("-c", "--collection", default=None)
    parser.add_argument("--model", type=Path, default=None, help="the GGUF that wrote the answers")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no-model", action="store_true", help="only the lexical rule (no model is loaded)")
    parser.add_argument("--min-terms", type=int, default=None, help="the lexical rule's least number of terms")
    args = parser.parse_args()

    from rag.prompt import RAG_SYSTEM_PROMPT, Source, rag_question
    from rag.support import MIN_TERMS

    min_terms = args.min_terms if args.min_terms is not None else MIN_TERMS

    if args.model is None and not args.no_model:
        raise SystemExit(
            "name the model that wrote the answers (--model), or measure the lexical rule alone (--no-model)"
        )
    rows = json.loads(args.answers.read_text())["results"]
    llm = None
    if not args.no_model:
        from backends.llamacpp.buffers import open_llama  # the product's buffer rule (AMX CPUs)

        llm = open_llama(model_path=str(args.model), n_ctx=4096, n_threads=2, verbose=False, logits_all=True)
    results = []
    for row, (texts, same) in zip(rows, passages_of(rows, args.collection), strict=True):
        sources = [Source(n, "file", None, None, text) for n, text in enumerate(texts, start=1)]
        conversation = [
            {"role": "system", "content": RAG_SYSTEM_PROMPT},
            {"role": "user", "content": rag_question(row["question"], sources)},
            {"role": "assistant", "content": row["answer"]},
        ]
        result: dict[str, Any] = {"line": row["line"], "correct": row["correct"], "same_passages": same}
        result["unheld_terms"] = unheld_terms(row["answer"], row["question"], texts, min_terms)
        for name, (check, yes, no) in CHECKS.items() if llm is not None else ():
            result[f"check_{name}"] = yes_share(llm, [*conversation, {"role": "user", "content": check}], yes, no)
        results.append(result)
        print(json.dumps(result), flush=True)
    summary: dict[str, Any] = {
        "lexical": {
            "right": sum(1 for r in results if r["correct"] and r["unheld_terms"]),
            "wrong": sum(1 for r in results if not r["correct"] and r["unheld_terms"]),
            "of_wrong": sum(1 for r in results if not r["correct"]),
        }
    }
    print(f"lexical rule fires on {summary['lexical']}")
    for name in CHECKS if llm is not None else ():
        key = f"check_{name}"
        right = [r[key] for r in results if r["correct"] and r[key] is not None]
        wrong = [r[key] for r in results if not r["correct"] and r[key] is not None]
        below = {str(t): {"right": sum(x < t for x in right), "wrong": sum(x < t for x in wrong)} for t in THRESHOLDS}
        summary[name] = {"auc": round(auc(right, wrong), 3), "right": len(right), "wrong": len(wrong), "below": below}
        print(f"{name}: AUC {summary[name]['auc']}; below a threshold (right/wrong): {below}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"answers": args.answers.name, "min_terms": min_terms, "summary": summary, "results": results},
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
