"""Which threshold keeps tools from a request they do not fit (app/tools/relevance.py), chosen on the tuning half.

For each question of ``bench/data/tool-calls.jsonl``, the similarity of the question to each offered function (the
product's own embedder and :func:`app.tools.relevance.similarities`), then, for each threshold, what the model's
answers would be if functions below it were not offered: a question left with no function is an abstention (right
when no call was expected, a missed call otherwise); one left with its functions keeps the outcome the model had in
the given ``hearth eval tools`` run (``--baseline PART=FILE``, the same model and form without the gate). This is a
projection for choosing; the chosen threshold is then measured for real with ``hearth eval tools --fitting``.

    .venv/bin/python bench/tool_relevance.py \\
        --baseline tuning=bench/data/tool-calls.tuning.native.qwen2.5-coder-1.5b.json \\
        --baseline held-out=bench/data/tool-calls.held-out.native.qwen2.5-coder-1.5b.json \\
        --json bench/data/tool-relevance.json

Only the tuning half chooses (the middle of the longest run of thresholds with its highest right count); the
held-out half is reported beside it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from app.settings import load_settings
from app.tools.call_eval import read_tool_questions
from app.tools.relevance import similarities
from rag.retrieval.embeddings import configured_embedder

DATA = Path(__file__).parent / "data"
THRESHOLDS = [round(0.02 * step, 2) for step in range(0, 31)]
RIGHT = {"right call", "right abstention"}


def projected(rows: list[dict[str, Any]], threshold: float) -> dict[str, int]:
    right = calls = abstentions = 0
    for row in rows:
        kept = any(score >= threshold for score in row["scores"])
        outcome = row["outcome"] if kept else ("right abstention" if row["expected"] is None else "missed call")
        right += outcome in RIGHT
        calls += outcome == "right call"
        abstentions += outcome == "right abstention"
    return {"right": right, "right_calls": calls, "right_abstentions": abstentions}


def middle_of_best(part: dict[str, dict[str, int]]) -> float:
    """The middle of the longest run of thresholds with the most right answers: the choice furthest from where
    the count drops on either side."""
    best = max(v["right"] for v in part.values())
    runs: list[list[float]] = []
    for t in THRESHOLDS:
        if part[str(t)]["right"] == best:
            if runs and runs[-1][-1] == THRESHOLDS[THRESHOLDS.index(t) - 1]:
                runs[-1].append(t)
            else:
                runs.append([t])
    longest = max(runs, key=len)
    return longest[(len(longest) - 1) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", action="append", required=True, help="PART=FILE of a hearth eval tools run")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    questions = {q.question: q for q in read_tool_questions(DATA / "tool-calls.jsonl")}
    embedder = configured_embedder(load_settings().rag.embedder_runtime)
    halves: dict[str, list[dict[str, Any]]] = {}
    for given in args.baseline:
        part, file = given.split("=", 1)
        run = json.loads(Path(file).read_text())
        rows = []
        for result in run["results"]:
            question = questions[result["question"]]
            scores = similarities(embedder, question.question, question.functions)
            expected = question.expected.name if question.expected is not None else None
            rows.append({"question": question.question, "expected": expected, "outcome": result["outcome"]})
            rows[-1]["scores"] = [round(s, 4) for s in scores]
        halves[part] = rows
    table = {part: {str(t): projected(rows, t) for t in THRESHOLDS} for part, rows in halves.items()}
    chosen = middle_of_best(table["tuning"])
    print("threshold  " + "  ".join(f"{part:>22}" for part in table))
    for t in THRESHOLDS:
        cells = [
            f"{v['right']:>2} ({v['right_calls']:>2} calls, {v['right_abstentions']} none)"
            for v in (table[part][str(t)] for part in table)
        ]
        print(f"{t:9.2f}  " + "  ".join(f"{c:>22}" for c in cells) + ("   <- chosen" if t == chosen else ""))
    if args.json:
        record = {
            "command": "bench/tool_relevance.py " + " ".join(f"--baseline {b}" for b in args.baseline),
            "embedder": type(embedder).__name__,
            "baselines": dict(b.split("=", 1) for b in args.baseline),
            "chosen_on": "tuning",
            "chosen": chosen,
            "projected": table,
            "questions": halves,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
