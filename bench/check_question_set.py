"""Check a question set written in a user's own words against the passages it was written from: no question
shares a run of four words with its passage, and every expected string is in it.

Usage: .venv/bin/python bench/check_question_set.py bench/data/user-words-answers.jsonl \
           bench/data/user-words-passages.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.question_rules import missing_expected, shared_run


def main(questions: Path, passages: Path) -> int:
    texts = {row["id"]: row["text"] for row in map(json.loads, passages.read_text().splitlines())}
    problems = 0
    for number, row in enumerate(map(json.loads, questions.read_text().splitlines()), start=1):
        passage = texts[row["passage"]]
        if run := shared_run(row["question"], passage):
            print(f"line {number}: shares {run!r} with {row['passage']}")
            problems += 1
        if missing := missing_expected(row["expected"], passage):
            print(f"line {number}: {row['passage']} does not hold {missing}")
            problems += 1
    print(f"{problems} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2])))
