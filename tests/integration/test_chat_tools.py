"""A conversation's answer with tools (ChatService with ToolUse), on the real engine with the embedded model: the
first answer made to call (the embedded model never calls on its own), the call asked about, run or refused as the
user said, the model going on after it, and every call kept with the answer across a restart; "always" asks only
once."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.answering.chat import TurnSaved, TurnStarted
from app.services.answering.tool_turn import ToolUse
from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services
from app.services.library.conversations import ConversationStore
from app.tools.consent import ConsentBook
from app.tools.documents_tool import DocumentSearch
from app.tools.loop import REFUSED, CallAsked, CallDone, Decision
from app.tools.toolbox import BUILT_IN, tools_box
from backends.base import Finished, GenerationParams

pytestmark = pytest.mark.integration


def _use(chat: Services, decision: Decision, asked: list[CallAsked]) -> ToolUse:
    def ask(call: CallAsked) -> Decision:
        asked.append(call)
        return decision

    box = tools_box([], 30.0)
    return ToolUse(box, ask, ConsentBook(chat.paths.tool_consent_file), max_calls=2, first="call")


def _params(chat: Services) -> GenerationParams:
    return dataclasses.replace(chat.generation_params(), temperature=0.0, max_new_tokens=160)


def test_an_allowed_call_runs_and_is_kept_with_the_answer(chat: Services) -> None:
    asked: list[CallAsked] = []
    events = list(
        chat.chat.send(None, "What is 12 times 7?", TurnSettings(_params(chat), "", tools=_use(chat, "once", asked)))
    )
    assert asked and asked[0].server == BUILT_IN and asked[0].tool == "calculator"
    done = [e for e in events if isinstance(e, CallDone)]
    assert done and done[0].allowed and done[0].call.id == asked[0].call.id
    assert any(isinstance(e, Finished) and e.reason in ("stop", "length") for e in events)
    saved = events[-1]
    assert isinstance(saved, TurnSaved)
    first = saved.message.tool_calls[0]
    assert (first.server, first.tool, first.allowed) == (BUILT_IN, "calculator", True)
    assert first.arguments == done[0].call.arguments and first.result == done[0].result
    store = ConversationStore(chat.paths.conversations_db)
    try:
        (summary,) = store.list()
        kept = store.get(summary.id).messages[-1]
    finally:
        store.close()
    assert kept.tool_calls == saved.message.tool_calls and kept.content == saved.message.content


def test_a_refused_call_does_not_run_and_the_model_goes_on(chat: Services) -> None:
    asked: list[CallAsked] = []
    events = list(
        chat.chat.send(None, "What is 12 times 7?", TurnSettings(_params(chat), "", tools=_use(chat, "deny", asked)))
    )
    done = [e for e in events if isinstance(e, CallDone)]
    assert done and not done[0].allowed and done[0].result == REFUSED
    assert any(isinstance(e, Finished) and e.reason in ("stop", "length") for e in events)
    saved = events[-1]
    assert isinstance(saved, TurnSaved)
    assert next((r.allowed, r.result) for r in saved.message.tool_calls) == (False, REFUSED)


def test_always_allowed_is_asked_once(chat: Services, isolated_home: Path) -> None:
    asked: list[CallAsked] = []
    list(chat.chat.send(None, "What is 2 plus 2?", TurnSettings(_params(chat), "", tools=_use(chat, "always", asked))))
    assert len(asked) >= 1
    assert ConsentBook(chat.paths.tool_consent_file).is_allowed(BUILT_IN, "calculator")
    again: list[CallAsked] = []
    events = list(
        chat.chat.send(None, "What is 2 plus 2?", TurnSettings(_params(chat), "", tools=_use(chat, "deny", again)))
    )
    assert again == []  # allowed for good: not asked, run
    assert next(e.allowed for e in events if isinstance(e, CallDone)) is True


LIGHTHOUSES = {
    "keeper.md": "# The keeper\n\nThe last keeper of Skerry Light was Agnes Moll, who left in 1961.",
    "lamp.md": "# The lamp\n\nThe lamp burned paraffin until 1927, then ran on electricity from a cable.",
    "fog.md": "# The fog signal\n\nThe fog horn sounded two blasts every thirty seconds in thick weather.",
    "birds.md": "# Birds\n\nPuffins nest on the north cliff of the island from April to August.",
    "boat.md": "# The supply boat\n\nA supply boat came from Lerwick every second Tuesday, weather allowing.",
}


@pytest.fixture
def chat_with_notes(isolated_home: Path, embedded_model: Path, tmp_path: Path) -> Iterator[Services]:
    """The services with a collection of five short notes, one passage given to each answer (top_k 1), and the
    calculator off, so that search_documents is the only tool (the call forced first is then a search)."""
    from app.services.container import build_services
    from app.settings import load_settings

    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in LIGHTHOUSES.items():
        (folder / name).write_text(text)
    settings = load_settings(model={"context_length": 2048}, rag={"top_k": 1}, tools={"calculator": False})
    services = build_services(settings)
    documents = services.documents.get()
    list(documents.ingestor.ingest([folder], "Lighthouse"))
    list(services.runtime.load(services.model_choice()))
    yield services
    services.close()


def test_with_a_collection_the_model_may_search_it_and_what_it_finds_is_numbered_on_and_kept(
    chat_with_notes: Services,
) -> None:
    chat = chat_with_notes
    documents = chat.documents.get()
    search = DocumentSearch("Lighthouse", documents.retriever.search, top_k=5)
    box = tools_box([], 30.0, [search.offered()], calculator=False)
    asked: list[CallAsked] = []

    def ask(call: CallAsked) -> Decision:
        asked.append(call)
        return "once"

    use = ToolUse(box, ask, ConsentBook(chat.paths.tool_consent_file), max_calls=1, first="call", search=search)
    events = list(
        chat.chat.send(
            None, "Who was the last keeper?", TurnSettings(_params(chat), "", collection="Lighthouse", tools=use)
        )
    )
    assert [a.tool for a in asked] == ["search_documents"]
    (given,) = next(e for e in events if isinstance(e, TurnStarted)).sources  # top_k 1: one passage in the prompt
    assert given.number == 1
    done = next(e for e in events if isinstance(e, CallDone))
    shown = [int(n) for n in re.findall(r"^\[(\d+)\] ", done.result, re.MULTILINE)]
    assert len(shown) == 5  # five notes, five passages: four of them new to this answer
    saved = events[-1]
    assert isinstance(saved, TurnSaved)
    kept = saved.message.sources
    assert [s.number for s in kept] == list(range(1, 6)) and kept[0] == given  # numbered on from the one given
    assert sorted(shown) == [1, 2, 3, 4, 5]  # the passage given keeps its number when the search finds it again
    assert {Path(s.path).name for s in kept} == set(LIGHTHOUSES)
    store = ConversationStore(chat.paths.conversations_db)
    try:
        (summary,) = store.list()
        assert store.get(summary.id).messages[-1].sources == kept  # and kept with the answer across a restart
    finally:
        store.close()
