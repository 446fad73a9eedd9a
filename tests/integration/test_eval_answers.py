"""`hearth eval answers` as a user runs it: a real subprocess, a real Chroma collection, the embedded 135M model.

What is asserted is the report's shape and that its counts agree with each other and with the per-question JSON;
never a quality figure (the 135M model's answers are weak, and that is not what this test is about).
"""

import json
import re
import sqlite3
from pathlib import Path

import pytest

from tests.integration.test_cli import hearth

pytestmark = pytest.mark.integration

QUESTIONS = [
    {"question": "Who was the last keeper of Skerry lighthouse?", "expected": ["Morag Innes"], "conversation": "k"},
    {"question": "In which year did she leave?", "expected": ["1998"], "conversation": "k"},  # a follow-up
    {"question": "What colour is the Skerry ferry?", "expected": [["red", "crimson"]], "source": "ferry.md"},
    {"question": "This one is beyond --limit.", "expected": ["never asked"]},
]


def _collection(folder: Path, home: Path) -> None:
    folder.mkdir()
    (folder / "keepers.md").write_text("# Keepers\n\nMorag Innes was the last keeper of Skerry; she left in 1998.\n")
    (folder / "ferry.md").write_text("# Ferry\n\nThe Skerry ferry is painted red and sails on Tuesdays.\n")
    ingest = hearth("ingest", str(folder), "-c", "Skerry", home=home, timeout=600)
    assert ingest.returncode == 0, ingest.stderr


@pytest.mark.timeout(900)  # ingest, model load and three short answers, on a busy 2-core machine
def test_eval_answers_reports_accuracy_and_citations(isolated_home: Path, tmp_path: Path, embedded_model: Path) -> None:
    _collection(tmp_path / "notes", isolated_home)
    questions = tmp_path / "qa.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    output = tmp_path / "results.json"

    result = hearth(
        "eval", "answers", str(questions), "-c", "Skerry", "--model", str(embedded_model),
        "--limit", "3", "--max-tokens", "48", "--output", str(output),
        home=isolated_home, timeout=600,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    progress = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in progress] == ["[1/3", "[2/3", "[3/3"]
    summary = re.search(r"accuracy (\d\.\d{3}) \((\d)/3 right\)\s+cited inline (\d\.\d{3}) \((\d)/3\)", result.stdout)
    assert summary, result.stdout
    accuracy, right, citation_share, cited = float(summary[1]), int(summary[2]), float(summary[3]), int(summary[4])
    assert accuracy == pytest.approx(right / 3, abs=0.001)
    assert citation_share == pytest.approx(cited / 3, abs=0.001)
    assert sum("right" in line.split("·")[0] for line in progress) == right

    report = json.loads(output.read_text(encoding="utf-8"))
    rows = report["results"]
    assert [row["line"] for row in rows] == [1, 2, 3]
    assert sum(row["correct"] for row in rows) == right
    assert sum(row["cited"] for row in rows) == cited
    assert report["accuracy"] == pytest.approx(accuracy, abs=0.001)
    for row in rows:
        assert row["passages"] >= 1 and row["prompt_tokens"] > 0
        assert 0 < row["completion_tokens"] <= 48
        assert row["answer_in_passages"], row  # two small files: the passages given always hold the answer
        # Anyone can re-check a figure: the sources each answer was given, numbered as it cites them, and its time.
        if row["turn"] == 1:
            assert [s["number"] for s in row["sources"]] == list(range(1, row["passages"] + 1)), row
        assert all(s["file"] and s["label"].startswith(s["file"]) for s in row["sources"]), row
        assert all(s["text"].strip() for s in row["sources"]), row  # the passage as the model was given it
        assert row["seconds"] > 0 and isinstance(row["cited_holds_answer"], bool)
    assert report["cited_right_share"] == pytest.approx(sum(r["cited_holds_answer"] for r in rows) / 3)
    assert "a cited passage held it for" in result.stdout
    # The follow-up was asked in the first question's conversation: its prompt holds the first turn and its answer.
    assert [(row["conversation"], row["turn"]) for row in rows] == [("k", 1), ("k", 2), (None, 1)]
    assert rows[1]["prompt_tokens"] > rows[0]["prompt_tokens"] + rows[0]["completion_tokens"]
    assert report["later_turns"]["questions"] == 1 and report["first_turns"]["questions"] == 2
    assert re.search(r"first questions \d/2 right, median \d+ tokens an answer\s+follow-ups \d/1 right", result.stdout)
    # Each question went through a throwaway conversation store, never the user's.
    conversations = isolated_home / "conversations.db"
    if conversations.exists():
        with sqlite3.connect(conversations) as db:
            assert db.execute("SELECT COUNT(*) FROM conversations").fetchone() == (0,)


@pytest.mark.timeout(900)
def test_eval_answers_with_kept_passages_joins_what_an_earlier_question_read(
    isolated_home: Path, tmp_path: Path, embedded_model: Path
) -> None:
    """`--keep-passages`: the collection's two passages come back for every question. The second question has them
    in the first one's order, so the slot's cache holds them already; the third has them in the other order, so
    their caches, kept when the first question read them, are joined instead of read. The report says how many
    tokens were joined."""
    _collection(tmp_path / "notes", isolated_home)
    questions = tmp_path / "qa.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS[:3]), encoding="utf-8")
    output = tmp_path / "results.json"
    result = hearth(
        "eval", "answers", str(questions), "-c", "Skerry", "--model", str(embedded_model),
        "--max-tokens", "16", "--output", str(output), "--keep-passages",
        home=isolated_home, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = json.loads(output.read_text(encoding="utf-8"))["results"]
    order = [[source["file"] for source in row["sources"]] for row in rows]
    assert order == [["keepers.md", "ferry.md"]] * 2 + [["ferry.md", "keepers.md"]]
    assert [row["joined_tokens"] > 0 for row in rows] == [False, False, True]
    assert rows[2]["joined_tokens"] < rows[2]["prompt_tokens"] / 2

    # --read-first: another set, asked first and not scored, reads the passages; a question in other words asked
    # after joins them, less the share of each read again (--recompute).
    first, reworded = tmp_path / "first.jsonl", tmp_path / "reworded.jsonl"
    first.write_text(json.dumps(QUESTIONS[0]) + "\n", encoding="utf-8")
    other_words = {"question": "The Skerry ferry: which colour is it painted?", "expected": [["red", "crimson"]]}
    reworded.write_text(json.dumps(other_words) + "\n", encoding="utf-8")
    warm, half = tmp_path / "warm.json", tmp_path / "half.json"
    for share, output in (("0", warm), ("0.5", half)):
        result = hearth(
            "eval", "answers", str(reworded), "-c", "Skerry", "--model", str(embedded_model),
            "--max-tokens", "8", "--output", str(output), "--keep-passages", "--read-first", str(first),
            "--recompute", share, home=isolated_home, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "Reading the passages of 1 other questions first" in result.stderr
    (whole,), (part,) = (json.loads(output.read_text(encoding="utf-8"))["results"] for output in (warm, half))
    assert whole["line"] == part["line"] == 1 and whole["question"] == other_words["question"]
    assert 0 < part["joined_tokens"] < whole["joined_tokens"]
    wrong = hearth("eval", "answers", str(reworded), "-c", "Skerry", "--read-first", str(first), home=isolated_home)
    assert wrong.returncode == 1 and "--keep-passages" in wrong.stderr


def test_eval_answers_names_the_bad_line_before_loading_anything(isolated_home: Path, tmp_path: Path) -> None:
    questions = tmp_path / "qa.jsonl"
    questions.write_text(json.dumps(QUESTIONS[0]) + '\n{"question": "No expected list"}\n', encoding="utf-8")
    result = hearth("eval", "answers", str(questions), "-c", "Skerry", home=isolated_home)
    assert result.returncode == 1
    assert 'qa.jsonl line 2 has no "expected" list' in result.stderr
    assert "what to do:" in result.stderr and "Traceback" not in result.stderr
    missing = hearth("eval", "answers", str(tmp_path / "nope.jsonl"), "-c", "Skerry", home=isolated_home)
    assert missing.returncode == 1 and "Question file not found" in missing.stderr


def test_eval_answers_on_a_missing_collection_says_so(isolated_home: Path, tmp_path: Path) -> None:
    questions = tmp_path / "qa.jsonl"
    questions.write_text(json.dumps(QUESTIONS[0]) + "\n", encoding="utf-8")
    result = hearth("eval", "answers", str(questions), "-c", "Nowhere", home=isolated_home)
    assert result.returncode == 1
    assert "no collection called 'Nowhere'" in result.stderr


def test_eval_answers_refuses_an_unknown_model_name(isolated_home: Path, tmp_path: Path) -> None:
    questions = tmp_path / "qa.jsonl"
    questions.write_text(json.dumps(QUESTIONS[0]) + "\n", encoding="utf-8")
    result = hearth("eval", "answers", str(questions), "-c", "Skerry", "--model", "no-such-model", home=isolated_home)
    assert result.returncode == 1
    assert "No model matches 'no-such-model'" in result.stderr
