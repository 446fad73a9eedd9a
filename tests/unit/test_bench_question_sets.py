"""The committed question sets stay usable: every line reads with the same reader `hearth eval` uses, and every
file a question names is one the corpus script makes (and checks it made)."""

from __future__ import annotations

from pathlib import Path

from rag.answer_eval import read_answer_questions
from rag.evaluation import read_questions

BENCH = Path(__file__).resolve().parents[2] / "bench"
CORPUS_FILES = BENCH / "corpus" / "debian_docs.files"


def corpus_files() -> set[str]:
    names = {line.strip() for line in CORPUS_FILES.read_text().splitlines() if line.strip()}
    assert names and CORPUS_FILES.name in (BENCH / "corpus" / "debian_docs.sh").read_text()
    return names


def test_the_retrieval_set_reads_and_names_only_files_of_the_corpus() -> None:
    questions = read_questions(BENCH / "data" / "debian-docs-retrieval.jsonl")
    assert len(questions) == 138
    assert {q.gold_file for q in questions} <= corpus_files()
    assert all(q.gold_page is not None for q in questions if q.gold_file.endswith(".pdf"))
    assert len({q.question for q in questions}) == len(questions)  # no question asked twice


def test_the_answer_set_reads_and_names_only_files_of_the_corpus() -> None:
    import json

    path = BENCH / "data" / "debian-docs-answers.jsonl"
    questions = read_answer_questions(path)
    assert len(questions) >= 60
    sources = {json.loads(line)["source"] for line in path.read_text().splitlines() if line.strip()}
    assert sources <= corpus_files()
