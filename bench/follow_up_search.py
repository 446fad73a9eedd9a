"""Whether a conversation's follow-ups are given the passages that hold their answers, for each way of searching a
follow-up (``rag.follow_up_search``): its own words; the previous question's words before them; both rankings taken
in turns; its own words with the passages of the files the previous answer came from first.

Retrieval alone, no model: the passages a turn is given depend only on its question, the question before it and the
passages that one was given, so every way is measured on the whole set in seconds. For each turn two counts: its
own passages hold the answer, and the passages its prompt holds (its own and every earlier turn's) hold it. An
answer can only be right from the documents when the second is true; which way the model answers best from is
then measured with `hearth eval answers` on the tuning half.

    bash bench/corpus/user_words.sh ~/.cache/hearth-bench/uw
    HEARTH_HOME=~/.cache/hearth-bench/uw-home .venv/bin/hearth ingest ~/.cache/hearth-bench/uw -c uw
    HEARTH_HOME=~/.cache/hearth-bench/uw-home .venv/bin/python bench/follow_up_search.py \\
        bench/data/conversation-answers.jsonl -c uw --json bench/data/conversation-follow-up-search.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

WAYS = ("question", "with-previous", "fused", "same-files")
CONTEXT = 8192  # room enough for every passage found: packing is not what is measured
ANSWER_TOKENS = 200


class _Counter:
    """Token counts as the embedder's tokenizer makes them (close enough to fit three passages in 8,192 tokens)."""

    context_length = CONTEXT

    def __init__(self, count: Any) -> None:
        self._count = count

    def count_tokens(self, text: str) -> int:
        return int(self._count(text))

    def count_chat_tokens(self, messages: Sequence[Any]) -> int:
        return sum(self.count_tokens(m.content) + 4 for m in messages)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("questions", type=Path)
    parser.add_argument("-c", "--collection", required=True)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--rewrite",
        type=Path,
        default=None,
        help="a GGUF chat model: also measure each follow-up rewritten by it as a question that stands alone",
    )
    args = parser.parse_args()
    from app.cli.eval import split_part
    from app.paths import ensure_data_dir, resolve_data_paths
    from app.services.answering.sources import find_sources
    from app.services.container import enforce_offline
    from app.services.library.documents import build_documents
    from app.settings import load_settings
    from backends.base import GenerationParams
    from rag.answer_eval import holds_expected, read_answer_questions
    from rag.prompt import RAG_SYSTEM_PROMPT

    enforce_offline()
    questions = read_answer_questions(args.questions)
    parts = {part: {q.line for q in split_part(questions, args.questions, part)} for part in ("tuning", "held-out")}
    settings = load_settings()
    documents = build_documents(settings, ensure_data_dir(resolve_data_paths(settings.home)))
    counter = _Counter(documents.embedder.count_tokens)
    params = GenerationParams(max_new_tokens=ANSWER_TOKENS)
    figures: dict[str, Any] = {}
    rewritten = _rewrites(args.rewrite, questions) if args.rewrite else {}
    try:
        for way in (*WAYS, "rewritten") if rewritten else WAYS:
            searching = replace(documents, follow_up_search="question" if way == "rewritten" else way)
            rows = []
            previous: dict[str, tuple[str, list[str], list[str]]] = {}  # question, files, texts shown so far
            for question in questions:
                before = previous.get(question.conversation or "")
                found = find_sources(
                    searching,
                    counter,
                    args.collection,
                    rewritten.get(question.line, question.question) if way == "rewritten" else question.question,
                    RAG_SYSTEM_PROMPT,
                    params,
                    settings.rag.top_k,
                    previous=before[0] if before else None,
                    previous_files=before[1] if before else (),
                )
                texts = [s.text for s in found.sources]
                shown = (before[2] if before else []) + texts
                if question.conversation is not None:
                    previous[question.conversation] = (question.question, [s.path for s in found.sources], shown)
                rows.append(
                    {
                        "line": question.line,
                        "turn": question.turn,
                        "own": holds_expected("\n".join(texts), question.expected),
                        "prompt": holds_expected("\n".join(shown), question.expected),
                        "files": [Path(s.path).name for s in found.sources],
                    }
                )
            figures[way] = {part: _counts([r for r in rows if r["line"] in lines]) for part, lines in parts.items()}
            figures[way]["rows"] = rows
            if way == "rewritten":
                for row in rows:
                    row["searched"] = rewritten.get(row["line"])
            for part in parts:
                c = figures[way][part]
                print(
                    f"{way:13} {part:8}  follow-ups: own passages {c['later_own']}/{c['later']}, prompt "
                    f"{c['later_prompt']}/{c['later']}   first questions {c['first_own']}/{c['first']}"
                )
    finally:
        documents.close()
    if args.json:
        document = {
            "command": "bench/follow_up_search.py " + " ".join(sys.argv[1:]),
            "questions": str(args.questions),
            "collection": args.collection,
            "top_k": settings.rag.top_k,
            "ways": figures,
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0


REWRITE = (
    "Previous question: {previous}\nFollow-up: {question}\n\nWrite the follow-up as one question that can be "
    "understood without the previous one: name what it is about. Reply with that question only."
)


def _rewrites(model: Path, questions: Sequence[Any]) -> dict[int, str]:
    """Each follow-up rewritten by ``model`` from the question before it, greedy, with the time each took."""
    import time

    from backends.llamacpp.buffers import open_llama  # the product's buffer rule (AMX CPUs)

    llm = open_llama(model_path=str(model), n_ctx=1024, n_threads=2, verbose=False)
    previous: dict[str, str] = {}
    rewritten: dict[int, str] = {}
    took: list[float] = []
    for question in questions:
        before = previous.get(question.conversation or "")
        if question.conversation is not None:
            previous[question.conversation] = question.question
        if before is None:
            continue
        started = time.perf_counter()
        reply = llm.create_chat_completion(
            [{"role": "user", "content": REWRITE.format(previous=before, question=question.question)}],
            temperature=0.0,
            max_tokens=48,
        )
        took.append(time.perf_counter() - started)
        text = str(reply["choices"][0]["message"]["content"] or "").strip().splitlines()
        rewritten[question.line] = text[0] if text else question.question
        print(f"{question.question!r} -> {rewritten[question.line]!r} ({took[-1]:.1f} s)", file=sys.stderr)
    took.sort()
    print(f"rewriting took {took[len(took) // 2]:.1f} s a follow-up (median; {took[0]:.1f}-{took[-1]:.1f} s)")
    return rewritten


def _counts(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    later = [r for r in rows if r["turn"] > 1]
    first = [r for r in rows if r["turn"] == 1]
    return {
        "later": len(later),
        "later_own": sum(r["own"] for r in later),
        "later_prompt": sum(r["prompt"] for r in later),
        "first": len(first),
        "first_own": sum(r["own"] for r in first),
    }


if __name__ == "__main__":
    raise SystemExit(main())
