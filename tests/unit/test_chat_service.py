"""The chat service with the deterministic fake backend: persistence, trimming, cancel and bad input."""

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.answering.chat import TurnSaved, TurnStarted
from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services, build_services
from app.settings import load_settings
from backends.base import CancelToken, Finished, GenerationParams, TextDelta
from backends.fake import FakeBackend
from models.shared.errors import ContextTooLong, EmptyMessage, ModelFileError
from tests.helpers import local_engines, make_inventory, write_tiny_gguf

PARAMS = GenerationParams(temperature=0.0, max_new_tokens=16)


def make_services(
    tmp_path: Path, context: int = 2048, model: Path | None = None, backend: FakeBackend | None = None
) -> Services:
    model = model or write_tiny_gguf(tmp_path / "tiny.gguf")
    settings = load_settings(model={"path": model, "context_length": context}, backend={"name": "fake"})
    engines = local_engines(lambda: backend or FakeBackend())
    return build_services(settings, inventory=make_inventory(), make_engine=engines)


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    services = make_services(tmp_path)
    list(services.runtime.load(services.model_choice()))
    yield services
    services.close()


def answer(services: Services, conversation_id: str | None, text: str) -> tuple[str, list[object]]:
    events = list(services.chat.send(conversation_id, text, TurnSettings(PARAMS, "sys")))
    started = events[0]
    assert isinstance(started, TurnStarted)
    return started.conversation_id, events


def test_a_turn_streams_and_is_stored(services: Services) -> None:
    conversation_id, events = answer(services, None, "tell me about owls")
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "You said: tell me about owls"
    assert isinstance(events[-2], Finished)
    saved = events[-1]
    assert isinstance(saved, TurnSaved)
    assert saved.message.stats is not None
    assert saved.message.stats.completion_tokens == 6
    stored = services.store.get(conversation_id)
    assert [(m.role, m.content) for m in stored.messages] == [
        ("user", "tell me about owls"),
        ("assistant", "You said: tell me about owls"),
    ]
    assert stored.title == "tell me about owls"


def test_empty_message_is_refused_and_nothing_is_stored(services: Services) -> None:
    with pytest.raises(EmptyMessage) as caught:
        list(services.chat.send(None, "   \n", TurnSettings(PARAMS, "sys")))
    assert caught.value.remedy
    assert services.store.list() == []


def test_a_message_longer_than_the_context_is_refused_and_the_conversation_kept(tmp_path: Path) -> None:
    services = make_services(tmp_path, context=256)
    list(services.runtime.load(services.model_choice()))
    conversation_id, _ = answer(services, None, "first question")
    before = services.store.get(conversation_id)
    with pytest.raises(ContextTooLong):
        list(services.chat.send(conversation_id, "word " * 400, TurnSettings(PARAMS, "sys")))
    assert services.store.get(conversation_id) == before


def test_old_turns_are_trimmed_and_the_user_is_told(tmp_path: Path) -> None:
    services = make_services(tmp_path, context=256)
    list(services.runtime.load(services.model_choice()))
    conversation_id: str | None = None
    dropped = []
    for turn in range(12):
        conversation_id, events = answer(services, conversation_id, f"question {turn} " + "word " * 12)
        started = events[0]
        assert isinstance(started, TurnStarted)
        dropped.append(started.dropped_messages)
        saved = events[-1]
        assert isinstance(saved, TurnSaved) and saved.message.stats is not None
        assert saved.message.stats.dropped_messages == started.dropped_messages
    assert dropped[0] == 0
    assert dropped[-1] > 0
    assert conversation_id is not None
    assert len(services.store.get(conversation_id).messages) == 24  # trimming never deletes stored history


def test_stop_keeps_the_partial_answer(tmp_path: Path) -> None:
    services = make_services(tmp_path, backend=FakeBackend(token_delay_s=0.01))
    list(services.runtime.load(services.model_choice()))
    cancel = CancelToken()
    events = services.chat.send(
        None, "one two three four five six seven eight nine ten", TurnSettings(PARAMS, "sys"), cancel=cancel
    )
    seen = []
    for event in events:
        seen.append(event)
        if isinstance(event, TextDelta) and len([e for e in seen if isinstance(e, TextDelta)]) == 3:
            threading.Thread(target=cancel.cancel).start()
    finished = next(e for e in seen if isinstance(e, Finished))
    assert finished.reason == "cancelled"
    saved = seen[-1]
    assert isinstance(saved, TurnSaved)
    assert saved.message.stats is not None and saved.message.stats.finish_reason == "cancelled"
    assert 3 <= saved.message.stats.completion_tokens < 12


def test_walking_away_mid_answer_still_saves_what_was_written(services: Services) -> None:
    events = services.chat.send(None, "alpha beta gamma delta", TurnSettings(PARAMS, "sys"))
    started = next(events)
    assert isinstance(started, TurnStarted)
    next(events)
    next(events)
    events.close()  # what Gradio does when the page goes away
    stored = services.store.get(started.conversation_id)
    assert [m.role for m in stored.messages] == ["user", "assistant"]
    assert stored.messages[1].content == "You said:"
    assert stored.messages[1].stats is not None
    assert stored.messages[1].stats.finish_reason == "cancelled"


def test_regenerate_replaces_the_last_answer(services: Services) -> None:
    conversation_id, _ = answer(services, None, "hello")
    events = list(services.chat.regenerate(conversation_id, TurnSettings(PARAMS, "sys")))
    assert isinstance(events[-1], TurnSaved)
    stored = services.store.get(conversation_id)
    assert [m.role for m in stored.messages] == ["user", "assistant"]
    assert stored.messages[-1].id == events[-1].message.id


def test_changing_the_system_prompt_is_remembered(services: Services) -> None:
    conversation_id, _ = answer(services, None, "hello")
    list(services.chat.send(conversation_id, "again", TurnSettings(PARAMS, "talk like a pirate")))
    assert services.store.get(conversation_id).system_prompt == "talk like a pirate"


def test_a_bad_model_file_is_reported_on_every_chat_and_nothing_is_lost(tmp_path: Path) -> None:
    good = make_services(tmp_path)
    list(good.runtime.load(good.model_choice()))
    conversation_id, _ = answer(good, None, "keep me")
    good.close()

    broken = tmp_path / "broken.gguf"
    broken.write_text("not a model")
    services = make_services(tmp_path, model=broken)
    with pytest.raises(ModelFileError):
        list(services.runtime.load(services.model_choice()))
    assert services.runtime.status.state == "error"
    with pytest.raises(ModelFileError) as caught:
        list(services.chat.send(conversation_id, "hello?", TurnSettings(PARAMS, "sys")))
    assert "GGUF" in caught.value.remedy
    assert [m.content for m in services.store.get(conversation_id).messages] == [
        "keep me",
        "You said: keep me",
    ]


def test_background_work_can_tell_whether_an_answer_is_being_written(services: Services) -> None:
    assert not services.chat.answering
    events = services.chat.send(None, "hello there", TurnSettings(PARAMS, "sys"))
    next(events)  # the turn has started
    assert services.chat.answering
    list(events)
    assert not services.chat.answering
    events = services.chat.send(None, "walk away", TurnSettings(PARAMS, "sys"))
    next(events)
    events.close()  # the page went away mid-answer
    assert not services.chat.answering


def test_the_answer_is_saved_as_it_is_written_and_the_end_replaces_the_draft(services: Services) -> None:
    from app.services.answering.chat import ChatService
    from app.services.answering.drafts import INTERRUPTED

    chat = ChatService(services.store, services.runtime, draft_every_s=0.0)  # a draft at every piece
    stream = chat.send(None, "one two three four", TurnSettings(PARAMS, "sys"))
    started = next(stream)
    assert isinstance(started, TurnStarted)
    seen: list[str] = []
    for event in stream:
        if isinstance(event, TextDelta):
            seen.append(event.text)
            if len(seen) == 3:  # mid-answer, what a kill now would leave: the question and the draft so far
                stored = services.store.get(started.conversation_id).messages
                assert [m.role for m in stored] == ["user", "assistant"]
                assert stored[-1].content == "".join(seen[:2]) or stored[-1].content == "".join(seen)
                assert stored[-1].stats is not None and stored[-1].stats.finish_reason == INTERRUPTED
    stored = services.store.get(started.conversation_id).messages
    assert [(m.role, m.content) for m in stored] == [("user", "one two three four"), ("assistant", "".join(seen))]
    assert stored[-1].stats is not None and stored[-1].stats.finish_reason == "stop"


def test_a_draft_is_due_every_interval_of_the_clock() -> None:
    from app.services.answering.drafts import DraftSchedule

    now = [100.0]
    schedule = DraftSchedule(2.0, clock=lambda: now[0])
    assert not schedule.due()
    now[0] = 101.9
    assert not schedule.due()
    now[0] = 102.0
    assert schedule.due() and not schedule.due()
    now[0] = 104.5
    assert schedule.due()
