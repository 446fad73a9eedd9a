"""The committed question sets stay usable: every line reads with the same reader `hearth eval` uses, and every
file a question names is one the corpus script makes (and checks it made)."""

from __future__ import annotations

from pathlib import Path

from rag.answer_eval import contains, read_answer_questions
from rag.evaluation import read_questions

BENCH = Path(__file__).resolve().parents[2] / "bench"
CORPUS_FILES = BENCH / "corpus" / "debian_docs.files"
MANUALS_FILES = BENCH / "corpus" / "debian_manuals.files"


def corpus_files(listing: Path = CORPUS_FILES) -> set[str]:
    names = {line.strip() for line in listing.read_text().splitlines() if line.strip()}
    assert names and listing.name in (listing.with_suffix(".sh")).read_text()
    return names


def test_the_retrieval_set_reads_and_names_only_files_of_the_corpus() -> None:
    questions = read_questions(BENCH / "data" / "debian-docs-retrieval.jsonl")
    assert len(questions) == 138
    assert {q.gold_file for q in questions} <= corpus_files()
    assert all(q.gold_page is not None for q in questions if q.gold_file.endswith(".pdf"))
    assert len({q.question for q in questions}) == len(questions)  # no question asked twice


def test_the_manuals_set_reads_and_names_only_pdf_pages_of_its_corpus() -> None:
    questions = read_questions(BENCH / "data" / "debian-manuals-retrieval.jsonl")
    assert len(questions) == 48
    assert {q.gold_file for q in questions} == corpus_files(MANUALS_FILES)  # every manual is asked about
    assert all(q.gold_page is not None for q in questions)
    assert len({q.question for q in questions}) == len(questions)


def test_each_retrieval_split_halves_its_set_into_tuning_and_held_out() -> None:
    import json

    for stem in ("debian-docs-retrieval", "debian-manuals-retrieval"):
        count = len(read_questions(BENCH / "data" / f"{stem}.jsonl"))
        split = json.loads((BENCH / "data" / f"{stem}.split.json").read_text())
        tuning, held_out = split["tuning"], split["held-out"]
        assert sorted(tuning + held_out) == list(range(1, count + 1)), stem  # every question in exactly one part
        assert tuning == list(range(1, count + 1, 2)), stem  # the odd lines, as the fusion policy was chosen


def test_the_answer_set_reads_and_names_only_files_of_the_corpus() -> None:
    import json

    path = BENCH / "data" / "debian-docs-answers.jsonl"
    questions = read_answer_questions(path)
    assert len(questions) >= 60
    sources = {json.loads(line)["source"] for line in path.read_text().splitlines() if line.strip()}
    assert sources <= corpus_files()


def test_the_answer_split_divides_the_set_into_tuning_and_held_out() -> None:
    import json

    questions = read_answer_questions(BENCH / "data" / "debian-docs-answers.jsonl")
    split = json.loads((BENCH / "data" / "debian-docs-answers.split.json").read_text())
    tuning, held_out = split["tuning"], split["held-out"]
    assert sorted(tuning + held_out) == list(range(1, len(questions) + 1))  # every question in exactly one part
    assert len(tuning) == 20 and tuning == list(range(1, len(questions) + 1, 4))  # every 4th, as the prompt was chosen


def test_a_part_is_read_from_the_split_file(tmp_path: Path) -> None:
    import pytest

    from app.cli.eval import split_part
    from models.shared.errors import HearthError

    questions_path = BENCH / "data" / "debian-docs-answers.jsonl"
    questions = read_answer_questions(questions_path)
    held_out = split_part(questions, questions_path, "held-out")
    assert len(held_out) == 57 and held_out[0] == questions[1]
    with pytest.raises(HearthError, match="no part called 'training'") as caught:
        split_part(questions, questions_path, "training")
    assert "held-out, tuning" in caught.value.remedy
    alone = tmp_path / "alone.jsonl"
    with pytest.raises(HearthError, match="has no split file"):
        split_part(questions, alone, "tuning")
    (tmp_path / "alone.split.json").write_text('{"tuning": [0, 99]}')
    with pytest.raises(HearthError, match="does not have"):
        split_part(questions, alone, "tuning")


def test_the_manuals_answer_set_reads_and_asks_about_every_manual() -> None:
    import json

    path = BENCH / "data" / "debian-manuals-answers.jsonl"
    questions = read_answer_questions(path)
    assert len(questions) == 32
    sources = [json.loads(line)["source"] for line in path.read_text().splitlines() if line.strip()]
    assert set(sources) == corpus_files(MANUALS_FILES)
    assert len({q.question for q in questions}) == len(questions)
    # No expected name is in its own question: an answer that repeats the question must not score right.
    assert not [q.line for q in questions if any(contains(q.question, a) for item in q.expected for a in item)]


def test_the_user_words_set_is_written_apart_from_its_passages_and_split_before_tuning() -> None:
    import json

    from rag.question_rules import missing_expected, shared_run

    path = BENCH / "data" / "user-words-answers.jsonl"
    questions = read_answer_questions(path)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    passages = {
        row["id"]: row
        for row in map(json.loads, (BENCH / "data" / "user-words-passages.jsonl").read_text().splitlines())
    }
    assert len(questions) >= 80 and len({q.question for q in questions}) == len(questions)
    listing = BENCH / "corpus" / "user_words.files"
    sources = {row["source"] for row in rows}
    assert sources == corpus_files(listing)  # every document is asked about
    assert len({Path(name).suffix for name in sources}) >= 3  # of at least three kinds
    for row in rows:
        passage = passages[row["passage"]]
        assert passage["source"] == row["source"] and "skipped" not in passage
        assert shared_run(row["question"], passage["text"]) is None, row["question"]
        assert missing_expected(row["expected"], passage["text"]) == [], row["question"]
    assert not [q.line for q in questions if any(contains(q.question, a) for item in q.expected for a in item)]
    split = json.loads((BENCH / "data" / "user-words-answers.split.json").read_text())
    assert sorted(split["tuning"] + split["held-out"]) == list(range(1, len(questions) + 1))
    assert split["tuning"] == list(range(1, len(questions) + 1, 2))


def test_the_rules_of_a_users_own_words_catch_copied_runs_and_invented_answers() -> None:
    from rag.question_rules import missing_expected, shared_run

    passage = "Exit immediately if a pipeline returns a non-zero status."
    assert shared_run("When does bash exit immediately if a pipeline fails?", passage) == "exit immediately if a"
    assert shared_run("Which option stops a script at the first failing command?", passage) is None
    assert missing_expected(["non-zero", ["zero", "nonzero"]], passage) == []
    assert missing_expected(["errexit"], passage) == ["errexit"]
