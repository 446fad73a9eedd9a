"""Conversations on disk, in SQLite.

Every change is one transaction in WAL mode, so a process killed at any moment leaves the database as it was
after the last committed change: a question is committed before its answer starts, and an answer when it ends.
A database that cannot be opened is never deleted or rewritten; a damaged one makes every use say so and point to
`hearth repair`, which keeps every conversation it can still read.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from app.services.answering.attachment_plan import AttachmentUse
from backends.base import Role
from models.shared.database import Database
from models.shared.errors import ConversationNotFound
from models.shared.wording import shorten
from rag.prompt import Source

SCHEMA_VERSION = 4
TITLE_CHARS = 60

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content TEXT NOT NULL,
    stats TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
"""

_MIGRATIONS = {
    # Document chat: the collection a conversation answers from, and the passages each answer cited.
    2: "ALTER TABLE conversations ADD COLUMN collection TEXT; ALTER TABLE messages ADD COLUMN sources TEXT",
    # Files attached to one conversation (app.services.library.attachment_store): their text, passages and vectors,
    # deleted with the conversation.
    3: """CREATE TABLE attachments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        text TEXT NOT NULL,
        pages INTEGER,
        passages TEXT NOT NULL,
        vectors BLOB NOT NULL,
        dimension INTEGER NOT NULL,
        embedder TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX attachments_by_conversation ON attachments(conversation_id, id)""",
    # Tool calls an answer made on the page: each call, whether the user allowed it, and its result.
    4: "ALTER TABLE messages ADD COLUMN tool_calls TEXT",
}


@dataclass(frozen=True)
class AnswerStats:
    """What the UI shows under an answer; stored with it."""

    prompt_tokens: int
    completion_tokens: int
    time_to_first_token_ms: float
    decode_tokens_per_s: float
    finish_reason: str
    dropped_messages: int = 0
    retrieve_ms: float = 0.0
    attachments: tuple[AttachmentUse, ...] = ()  # how each file attached to the conversation served this answer
    adapter: str = ""  # the LoRA adapter the answer was written with, in words ("zubrowka", "zubrowka at 0.5")


@dataclass(frozen=True)
class ToolRecord:
    """One tool call an answer made, kept with it: what was called with what, whether the user allowed it, and
    what came back (the refusal, when not allowed)."""

    name: str  # as the model called it
    server: str  # "built-in", or the MCP server's name ("" for a tool that does not exist)
    tool: str  # its own name there
    arguments: str  # JSON, as the model wrote it
    allowed: bool
    result: str
    is_error: bool


@dataclass(frozen=True)
class StoredMessage:
    id: int
    role: Role
    content: str
    stats: AnswerStats | None
    sources: tuple[Source, ...] = ()
    tool_calls: tuple[ToolRecord, ...] = ()


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    system_prompt: str
    created_at: float
    updated_at: float
    messages: tuple[StoredMessage, ...]
    collection: str | None = None


@dataclass(frozen=True)
class ConversationSummary:
    id: str
    title: str
    updated_at: float
    message_count: int


class ConversationStore:
    def __init__(self, db_path: Path) -> None:
        self._database = Database(
            db_path,
            _SCHEMA,
            SCHEMA_VERSION,
            "conversation database",
            "to start with no conversations",
            _MIGRATIONS,
            meanwhile="Until then, conversations can be neither opened nor saved.",
        )
        self._transaction = self._database.transaction

    @property
    def database(self) -> Database:
        """The database, shared with what is kept per conversation (its attached files)."""
        return self._database

    def create(self, system_prompt: str, title: str = "New chat", collection: str | None = None) -> Conversation:
        now = time.time()
        conversation_id = uuid.uuid4().hex
        with self._transaction() as db:
            db.execute(
                "INSERT INTO conversations (id, title, system_prompt, created_at, updated_at, collection) "
                "VALUES (?,?,?,?,?,?)",
                (conversation_id, title, system_prompt, now, now, collection),
            )
        return Conversation(conversation_id, title, system_prompt, now, now, (), collection)

    def list(self) -> list[ConversationSummary]:
        rows = self._database.rows(
            "SELECT c.id, c.title, c.updated_at, COUNT(m.id) FROM conversations c "
            "LEFT JOIN messages m ON m.conversation_id = c.id "
            "GROUP BY c.id ORDER BY c.updated_at DESC, c.rowid DESC"
        )
        return [ConversationSummary(r[0], r[1], r[2], r[3]) for r in rows]

    def get(self, conversation_id: str) -> Conversation:
        with self._database.reading() as db:  # both reads see the same state
            row = db.execute(
                "SELECT id, title, system_prompt, created_at, updated_at, collection FROM conversations WHERE id = ?",
                (conversation_id,),
            ).fetchone()
            if row is None:
                raise ConversationNotFound(
                    "That conversation no longer exists.",
                    "Pick another one from the list or start a new chat.",
                )
            messages = db.execute(
                "SELECT id, role, content, stats, sources, tool_calls FROM messages "
                "WHERE conversation_id = ? ORDER BY id",
                (conversation_id,),
            ).fetchall()
        return Conversation(
            id=row[0],
            title=row[1],
            system_prompt=row[2],
            created_at=row[3],
            updated_at=row[4],
            messages=tuple(_message(m) for m in messages),
            collection=row[5],
        )

    def append(
        self,
        conversation_id: str,
        role: Role,
        content: str,
        stats: AnswerStats | None = None,
        sources: tuple[Source, ...] = (),
        tool_calls: tuple[ToolRecord, ...] = (),
    ) -> StoredMessage:
        now = time.time()
        stats_json = json.dumps(asdict(stats)) if stats else None
        sources_json = json.dumps([asdict(s) for s in sources]) if sources else None
        calls_json = _calls_json(tool_calls)
        with self._transaction() as db:
            row = db.execute("SELECT title FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
            if row is None:
                raise ConversationNotFound("That conversation was deleted.", "Start a new chat to keep talking.")
            cursor = db.execute(
                "INSERT INTO messages (conversation_id, role, content, stats, sources, tool_calls, created_at) "
                "VALUES (?,?,?,?,?,?,?)",
                (conversation_id, role, content, stats_json, sources_json, calls_json, now),
            )
            title = row[0]
            if role == "user" and title == "New chat":
                title = make_title(content)
            db.execute(
                "UPDATE conversations SET updated_at = ?, title = ? WHERE id = ?",
                (now, title, conversation_id),
            )
            message_id = int(cursor.lastrowid or 0)
        return StoredMessage(message_id, role, content, stats, sources, tool_calls)

    def update_answer(
        self,
        message_id: int,
        content: str,
        stats: AnswerStats,
        sources: tuple[Source, ...] = (),
        tool_calls: tuple[ToolRecord, ...] = (),
    ) -> StoredMessage:
        """Replace the text, stats, sources and tool calls of the answer ``message_id`` (a draft saved while it was
        written)."""
        stats_json = json.dumps(asdict(stats))
        sources_json = json.dumps([asdict(s) for s in sources]) if sources else None
        with self._transaction() as db:
            updated = db.execute(
                "UPDATE messages SET content = ?, stats = ?, sources = ?, tool_calls = ? "
                "WHERE id = ? AND role = 'assistant'",
                (content, stats_json, sources_json, _calls_json(tool_calls), message_id),
            )
            if updated.rowcount == 0:
                raise ConversationNotFound("That conversation was deleted.", "Start a new chat to keep talking.")
        return StoredMessage(message_id, "assistant", content, stats, sources, tool_calls)

    def delete_trailing_assistant(self, conversation_id: str) -> None:
        """Remove the last message if it is an answer (to regenerate it)."""
        with self._transaction() as db:
            db.execute(
                "DELETE FROM messages WHERE id = (SELECT id FROM messages WHERE conversation_id = ? "
                "ORDER BY id DESC LIMIT 1) AND role = 'assistant'",
                (conversation_id,),
            )

    def set_system_prompt(self, conversation_id: str, system_prompt: str) -> None:
        with self._transaction() as db:
            db.execute("UPDATE conversations SET system_prompt = ? WHERE id = ?", (system_prompt, conversation_id))

    def set_collection(self, conversation_id: str, collection: str | None) -> None:
        with self._transaction() as db:
            db.execute("UPDATE conversations SET collection = ? WHERE id = ?", (collection, conversation_id))

    def delete(self, conversation_id: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def close(self) -> None:
        self._database.close()


def make_title(first_message: str) -> str:
    return shorten(first_message, TITLE_CHARS) or "New chat"


def _message(row: tuple[int, str, str, str | None, str | None, str | None]) -> StoredMessage:
    stats = _stats(json.loads(row[3])) if row[3] else None
    sources = tuple(Source(**s) for s in json.loads(row[4])) if row[4] else ()
    calls = tuple(ToolRecord(**c) for c in json.loads(row[5])) if row[5] else ()
    role: Role = "user" if row[1] == "user" else "assistant"
    return StoredMessage(row[0], role, row[2], stats, sources, calls)


def _calls_json(calls: tuple[ToolRecord, ...]) -> str | None:
    return json.dumps([asdict(c) for c in calls]) if calls else None


def _stats(stored: dict[str, object]) -> AnswerStats:
    uses = stored.pop("attachments", None) or []
    return AnswerStats(
        **stored,  # type: ignore[arg-type]
        attachments=tuple(AttachmentUse(**use) for use in uses),  # type: ignore[attr-defined]
    )
