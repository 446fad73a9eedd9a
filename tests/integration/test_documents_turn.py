"""The one turn builder (app/services/answering/documents_turn.py) behind the page and the terminal, with a real
collection (MiniLM, Chroma) and the fake model, which echoes the prompt's last user message: the numbered passages,
then the question. The echo puts marker [2] right after passage 1's last sentence, so the citation check must move it
to [1] and say so, whichever front end asked. (The API's side is in test_api_server.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.answering.ask import AskFinished, AskStarted, ask
from app.services.answering.chat import TurnSaved, TurnStarted
from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services, build_services
from app.services.serving.runtime import start_engine
from app.settings import load_settings
from backends.base import GenerationParams, TextDelta
from tests.helpers import make_inventory, write_tiny_gguf

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
QUESTION = "Who designed the Skerry lighthouse?"
MOVED = "Citation corrected: the answer cites [2], but it is passage [1] that says “1852”, “after”, “alan”."
PARAMS = GenerationParams(temperature=0.0, max_new_tokens=400)


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    home = tmp_path_factory.mktemp("turn") / "home"
    model = write_tiny_gguf(home.parent / "tiny.gguf")
    settings = load_settings(home=home, model={"path": model, "context_length": 1024}, backend={"name": "fake"})
    built = build_services(settings, inventory=make_inventory(), make_engine=start_engine)
    try:
        list(built.runtime.load(built.model_choice()))
        documents = built.documents.get()
        list(documents.ingestor.ingest([CORPUS / "lighthouse-history.md", CORPUS / "sourdough.html"], "Coast notes"))
        yield built
    finally:
        built.close()


def test_the_page_saves_the_answer_with_the_citation_moved(services: Services) -> None:
    events = list(services.chat.send(None, QUESTION, TurnSettings(PARAMS, "", collection="Coast notes")))
    started = next(e for e in events if isinstance(e, TurnStarted))
    assert [s.number for s in started.sources][:2] == [1, 2]
    written = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "winter. [2] Keepers" in written  # streamed as the model wrote it
    turn_saved = next(e for e in events if isinstance(e, TurnSaved))
    saved = turn_saved.message
    assert "winter. [1] Keepers" in saved.content and "winter. [2]" not in saved.content
    assert turn_saved.notes == (MOVED,)  # the page says so under the answer it showed as written
    stored = services.store.get(started.conversation_id).messages[-1]
    assert stored.content == saved.content  # what a reload shows


def test_hearth_ask_finishes_with_the_same_correction(services: Services) -> None:
    documents = services.documents.get()
    events = list(ask(documents, services.runtime, "Coast notes", QUESTION, PARAMS, top_k=3))
    started = next(e for e in events if isinstance(e, AskStarted))
    assert started.found.sources and started.prompt_tokens > 0
    final = next(e for e in events if isinstance(e, AskFinished)).answer
    assert final.notes == (MOVED,)
    assert "winter. [1] Keepers" in final.text
