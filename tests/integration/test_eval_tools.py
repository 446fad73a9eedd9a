"""`hearth eval tools` with the real engine and the embedded model: every question of the committed set answered
through the API's path, each outcome counted, and no call ever invalid for its schema (the grammar holds even a
135M model to it); the two forms of offering tools reach the engine as they should."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.eval_tools import offered_request
from app.tools.call_eval import read_tool_questions
from backends.base import GenerationParams
from tests.integration.test_cli import hearth

pytestmark = pytest.mark.integration

QUESTIONS = Path(__file__).parents[2] / "bench" / "data" / "tool-calls.jsonl"


@pytest.mark.parametrize("form", ["native", "written"])
def test_the_set_is_asked_and_scored_and_no_call_is_invalid(
    isolated_home: Path, embedded_model: Path, tmp_path: Path, form: str
) -> None:
    # Three questions that need a call and three that need none, from the committed set.
    lines = QUESTIONS.read_text().splitlines()
    chosen = tmp_path / "six.jsonl"
    chosen.write_text("\n".join([*lines[:3], *lines[40:43]]) + "\n")
    output = tmp_path / "tools.json"
    run = hearth(
        "eval", "tools", str(chosen), "--model", str(embedded_model), "--form", form, "--output", str(output),
        home=isolated_home, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    saved = json.loads(output.read_text())
    assert (saved["form"], saved["part"], saved["questions"], saved["needed_calls"]) == (form, "all", 6, 3)
    assert len(saved["results"]) == 6 and saved["invalid_calls"] == 0
    assert sum(saved["outcomes"].values()) == 6
    assert f"{saved['right']}/6 right" in run.stdout
    assert run.stdout.count("] right ·") + run.stdout.count("] WRONG ·") == 6
    for result in saved["results"]:
        assert result["outcome"] != "invalid call", result
        if result["outcome"] in ("right call", "wrong call", "needless call"):
            assert result["calls"] and all(json.loads(c["arguments"]) is not None for c in result["calls"])
        else:
            assert not result["calls"]


def test_native_offers_the_tools_to_the_template_and_written_puts_them_in_the_system_message() -> None:
    question = read_tool_questions(QUESTIONS)[0]
    messages, params = offered_request(question, GenerationParams(), "Be brief.", "native")
    assert params.tools == question.functions and params.grammar is not None and params.grammar.triggers
    assert [m.role for m in messages] == ["system", "user"] and messages[0].content == "Be brief."
    messages, params = offered_request(question, GenerationParams(), "Be brief.", "written")
    assert params.tools == () and params.grammar is not None
    assert messages[0].content.startswith("Be brief.") and '"name": "get_weather"' in messages[0].content


def test_a_set_that_cannot_be_read_is_refused_with_the_line(isolated_home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "functions": [], "expected": null}\n')
    run = hearth("eval", "tools", str(bad), home=isolated_home)
    assert run.returncode != 0 and "Line 1 of bad.jsonl is not a tool question" in run.stderr
    assert read_tool_questions(QUESTIONS)  # and the committed set reads
