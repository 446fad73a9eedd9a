"""Offering only the tools that fit a request (app/tools/relevance.py, ToolUse.for_request): the pure parts, with
scores given; the real embedder's scores are tested in tests/integration/test_tool_relevance.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from app.services.answering.tool_turn import ToolUse
from app.settings import ToolsSettings
from app.tools.consent import ConsentBook
from app.tools.relevance import FIT_THRESHOLD, fitting, tool_text
from app.tools.toolbox import ToolBox, built_in_tools
from backends.base import ToolSpec

WEATHER = ToolSpec("get_weather", "Current weather in a city.", json.dumps({"type": "object"}))


def test_a_tool_is_compared_by_its_name_in_words_and_its_description() -> None:
    assert tool_text(WEATHER) == "get weather: Current weather in a city."
    assert tool_text(ToolSpec("send-mail", "  ", "{}")) == "send mail"


def test_the_tools_kept_are_those_whose_scores_reach_the_threshold_in_their_order() -> None:
    assert fitting([0.3, 0.05, 0.06, -0.2], 0.06) == [0, 2]
    assert fitting([], 0.06) == []
    assert fitting([-1.0, 0.0], -1.0) == [0, 1]  # -1: every tool offered


def test_the_settings_default_is_the_threshold_chosen_on_the_tuning_half() -> None:
    recorded = json.loads((Path(__file__).parents[2] / "bench" / "data" / "tool-relevance.json").read_text())
    assert ToolsSettings().fit_threshold == FIT_THRESHOLD == recorded["chosen"]


def test_a_turn_offers_the_fitting_tools_unless_a_call_is_asked_for_first(tmp_path: Path) -> None:
    box = ToolBox(tuple(built_in_tools()))
    asked: list[str] = []

    def fits(request: str, tools: Sequence[ToolSpec]) -> Sequence[ToolSpec]:
        asked.append(request)
        return [t for t in tools if "times" in request]

    def use(first: str) -> ToolUse:
        return ToolUse(box, lambda _: "once", ConsentBook(tmp_path / "c.json"), first=first, fits=fits)  # type: ignore[arg-type]

    assert use("auto").for_request("Hello!").offered == ()
    assert [o.spec.name for o in use("auto").for_request("What is 12 times 7?").offered] == ["calculator"]
    assert use("call").for_request("Hello!") == box  # the person asked for a call: every tool
    assert asked == ["Hello!", "What is 12 times 7?"]
    assert ToolUse(box, lambda _: "once", ConsentBook(tmp_path / "c.json")).for_request("Hello!") == box


def test_each_tool_is_embedded_once_and_later_requests_only_embed_themselves() -> None:
    import numpy as np

    from app.tools.relevance import similarities

    class Counting:
        """Embeds a text as its letter counts (a stand-in for the model), and counts what it was asked."""

        def __init__(self) -> None:
            self.asked: list[str] = []

        def embed(self, texts: list[str]) -> np.ndarray:
            self.asked += texts
            return np.array([[t.count(c) + 0.1 for c in "aeiost"] for t in texts], dtype=np.float32)

    embedder = Counting()
    calculator = ToolSpec("calculator", "Compute sums exactly.", "{}")
    first = similarities(embedder, "What is 12 times 7?", [calculator, WEATHER])  # type: ignore[arg-type]
    assert len(embedder.asked) == 3
    again = similarities(embedder, "What is 12 times 7?", [WEATHER, calculator])  # type: ignore[arg-type]
    assert embedder.asked[3:] == ["What is 12 times 7?"]  # the tools' vectors were kept
    assert again == [first[1], first[0]] and all(-1.0 <= s <= 1.0 for s in first)
