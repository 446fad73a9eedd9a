"""The prompt layouts measured (``bench/prompt_layouts.py``) change only where things stand in the
user's turn: every layout holds every passage, its number and the question, and ``today`` is the product's own."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from rag.prompt import Source, rag_question

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "prompt_layouts.py"
SOURCES = [Source(1, "a.pdf", 3, "Intro", "Alpha says one."), Source(2, "b.html", None, None, "Beta says two.")]


def layouts() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prompt_layouts", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and typing look modules up by name
    spec.loader.exec_module(module)
    return module


def test_today_is_the_products_own_prompt() -> None:
    module = layouts()
    assert module.LAYOUTS["today"]("Which?", SOURCES, (7,)) == rag_question("Which?", SOURCES, (7,))


def test_every_layout_holds_the_passages_their_numbers_and_the_question() -> None:
    module = layouts()
    for name, layout in module.LAYOUTS.items():
        text = layout("Which one?", SOURCES)
        assert "[1] Alpha says one." in text and "[2] Beta says two." in text, name
        assert text.rstrip().count("Question: Which one?") == (2 if name == "ask-first" else 1), name


def test_the_layouts_differ_where_they_say() -> None:
    module = layouts()
    assert module.LAYOUTS["ask-first"]("Q?", SOURCES).startswith("Question: Q?\n\nPassages:")
    best_last = module.LAYOUTS["best-last"]("Q?", SOURCES)
    assert best_last.index("[2] Beta") < best_last.index("[1] Alpha")
    assert module.LAYOUTS["short"]("Q?", SOURCES).endswith("Question: Q?\n" + module.SHORT_INSTRUCTION)
    # With nothing found, every layout says so as the product does.
    for layout in module.LAYOUTS.values():
        assert layout("Q?", []) == rag_question("Q?", [])


def test_the_oracle_gives_only_the_passages_holding_the_expected_answer() -> None:
    module = layouts()
    module._expected["Which two?"] = [["two"]]
    narrowed = module.LAYOUTS["oracle"]("Which two?", SOURCES)
    assert "[2] Beta says two." in narrowed and "Alpha" not in narrowed
    module._expected["Which three?"] = [["three"]]  # held by none: every passage, as found
    assert module.LAYOUTS["oracle"]("Which three?", SOURCES) == rag_question("Which three?", SOURCES)


def test_ranked_two_likely_one_keeps_the_first_two_and_adds_the_scorers_choice(monkeypatch: Any) -> None:
    module = layouts()
    four = [*SOURCES, Source(3, "c.md", None, None, "Gamma says three."), Source(4, "d.md", None, None, "Delta.")]
    monkeypatch.setattr(module, "_likelihood_order", lambda question, sources: [3, 0, 2, 1])
    chosen = module.LAYOUTS["ranked-2-likely-1"]("Q?", four)
    assert "[1] Alpha" in chosen and "[2] Beta" in chosen and "[4] Delta." in chosen and "Gamma" not in chosen
    assert chosen.index("[2] Beta") < chosen.index("[4] Delta.")  # in the ranking's order
    monkeypatch.setattr(module, "_likelihood_order", lambda question, sources: [1, 0, 2, 3])
    assert "Gamma" not in module.LAYOUTS["ranked-2-likely-1"]("Q?", four)  # the scorer agrees: two passages
