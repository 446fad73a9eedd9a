import sqlite3
from pathlib import Path

import pytest

from app.errors import ConversationNotFound, StorageError
from app.services.conversations import AnswerStats, ConversationStore, make_title


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    return ConversationStore(tmp_path / "c.db")


def test_round_trip_and_title_from_first_question(store: ConversationStore) -> None:
    conversation = store.create("be brief")
    store.append(conversation.id, "user", "How do   tides work?")
    stats = AnswerStats(10, 4, 120.0, 80.0, "stop")
    store.append(conversation.id, "assistant", "The moon.", stats)
    loaded = store.get(conversation.id)
    assert loaded.title == "How do tides work?"
    assert loaded.system_prompt == "be brief"
    assert [(m.role, m.content) for m in loaded.messages] == [
        ("user", "How do   tides work?"),
        ("assistant", "The moon."),
    ]
    assert loaded.messages[1].stats == stats
    assert loaded.messages[0].stats is None


def test_list_is_newest_first_with_counts(store: ConversationStore) -> None:
    first = store.create("s")
    second = store.create("s")
    store.append(first.id, "user", "older chat, updated last")
    summaries = store.list()
    assert [s.id for s in summaries] == [first.id, second.id]
    assert [s.message_count for s in summaries] == [1, 0]


def test_conversations_survive_a_restart(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "c.db")
    conversation = store.create("s")
    store.append(conversation.id, "user", "remember me")
    store.close()
    reopened = ConversationStore(tmp_path / "c.db")
    assert reopened.get(conversation.id).messages[0].content == "remember me"


def test_regenerate_removes_only_a_trailing_answer(store: ConversationStore) -> None:
    conversation = store.create("s")
    store.append(conversation.id, "user", "q")
    store.delete_trailing_assistant(conversation.id)  # nothing to remove: the question stays
    assert len(store.get(conversation.id).messages) == 1
    store.append(conversation.id, "assistant", "a")
    store.delete_trailing_assistant(conversation.id)
    assert [m.role for m in store.get(conversation.id).messages] == ["user"]


def test_delete_and_missing_conversation(store: ConversationStore) -> None:
    conversation = store.create("s")
    store.append(conversation.id, "user", "q")
    store.delete(conversation.id)
    with pytest.raises(ConversationNotFound):
        store.get(conversation.id)
    with pytest.raises(ConversationNotFound):
        store.append(conversation.id, "user", "again")
    assert store.list() == []


def test_a_damaged_database_is_reported_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    garbage = b"this is not a database" * 100
    db.write_bytes(garbage)
    with pytest.raises(StorageError) as caught:
        ConversationStore(db)
    assert "Move it aside" in caught.value.remedy
    assert db.read_bytes() == garbage


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA user_version=99")
    with pytest.raises(StorageError, match="newer Hearth"):
        ConversationStore(db)


@pytest.mark.parametrize(
    ("text", "title"),
    [("  hi  ", "hi"), ("", "New chat"), ("word " * 30, ("word " * 11).strip() + "…")],
)
def test_titles(text: str, title: str) -> None:
    assert make_title(text) == title
