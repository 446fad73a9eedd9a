import sqlite3
from pathlib import Path

import pytest

from app.services.library.conversations import AnswerStats, ConversationStore, ToolRecord, make_title
from models.shared.database import DamagedStore
from models.shared.errors import ConversationNotFound, StorageError
from rag.prompt import Source


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
    """Opening it works (the page must come up); every use then names the file and `hearth repair`."""
    db = tmp_path / "c.db"
    garbage = b"this is not a database" * 100
    db.write_bytes(garbage)
    store = ConversationStore(db)
    for use in (store.list, lambda: store.create("s"), lambda: store.get("x")):
        with pytest.raises(DamagedStore) as caught:
            use()
        assert caught.value.path == db and str(db) in caught.value.message
        assert "hearth repair" in caught.value.remedy
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


def test_answers_keep_their_sources_and_conversations_their_collection(store: ConversationStore) -> None:
    conversation = store.create("s", collection="Work notes")
    store.append(conversation.id, "user", "When was it built?")
    sources = (Source(1, "/d/a.pdf", 3, None, "Built in 1852."), Source(2, "/d/b.md", None, "Intro", "Hello."))
    store.append(conversation.id, "assistant", "In 1852 [1].", AnswerStats(1, 2, 3.0, 4.0, "stop"), sources)
    loaded = store.get(conversation.id)
    assert loaded.collection == "Work notes"
    assert loaded.messages[1].sources == sources
    assert loaded.messages[0].sources == ()
    store.set_collection(conversation.id, None)
    assert store.get(conversation.id).collection is None


def test_a_version_1_database_is_upgraded_in_place_with_nothing_lost(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE conversations (id TEXT PRIMARY KEY, title TEXT NOT NULL, system_prompt TEXT NOT NULL, "
            "created_at REAL NOT NULL, updated_at REAL NOT NULL);"
            "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, conversation_id TEXT NOT NULL "
            "REFERENCES conversations(id) ON DELETE CASCADE, role TEXT NOT NULL, content TEXT NOT NULL, stats TEXT, "
            "created_at REAL NOT NULL);"
            "INSERT INTO conversations VALUES ('c1', 'Old chat', 'sys', 1.0, 2.0);"
            "INSERT INTO messages (conversation_id, role, content, stats, created_at) VALUES ('c1','user','hi',NULL,1);"
            "PRAGMA user_version=1;"
        )
    store = ConversationStore(path)
    loaded = store.get("c1")
    assert (loaded.title, loaded.collection, [m.content for m in loaded.messages]) == ("Old chat", None, ["hi"])
    store.append("c1", "assistant", "hello", sources=(Source(1, "/x.txt", None, None, "x"),))
    assert store.get("c1").messages[1].sources[0].path == "/x.txt"
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4


def test_answers_keep_their_tool_calls_across_a_restart_and_a_draft_update(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "c.db")
    conversation = store.create("s")
    store.append(conversation.id, "user", "What is 12 times 7?")
    asked = ToolRecord("calculator", "built-in", "calculator", '{"expression": "12*7"}', True, "84", False)
    draft = store.append(conversation.id, "assistant", "", AnswerStats(0, 0, 0.0, 0.0, "interrupted"), (), (asked,))
    refused = ToolRecord("files__read", "files", "read", "{}", False, "The user did not allow this call.", True)
    store.update_answer(draft.id, "It is 84.", AnswerStats(1, 2, 3.0, 4.0, "stop"), (), (asked, refused))
    store.close()
    reopened = ConversationStore(tmp_path / "c.db")
    question, answer = reopened.get(conversation.id).messages
    assert question.tool_calls == () and answer.content == "It is 84."
    assert answer.tool_calls == (asked, refused)
