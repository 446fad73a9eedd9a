"""The counts ``bench/question_likelihood.py`` prints: how often the first passage, and the first two, hold the
answer in the ranking's order and in the scoring model's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "question_likelihood.py"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("question_likelihood", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_ranking_and_the_model_are_counted_apart() -> None:
    rows = [
        {"holds": [True, False, False], "model_order": [1, 0, 2], "seconds": 1.0},  # the ranking right, the model not
        {"holds": [False, False, True], "model_order": [2, 0, 1], "seconds": 3.0},  # the model right, the ranking not
        {"holds": [False, True, False], "model_order": [0, 1, 2], "seconds": 2.0},  # both in their first two
        {"holds": [False, False, False], "model_order": [0, 1, 2], "seconds": 2.5},  # held by none
    ]
    figures = script().summary(rows)
    assert figures == {
        "questions": 4,
        "ranking_first": 1,
        "model_first": 1,
        "ranking_two": 2,
        "model_two": 3,
        "any": 3,
        "seconds_median": 2.5,
    }
