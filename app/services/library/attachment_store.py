"""Files attached to a conversation, kept in the conversation database beside it: the text as read, the passages
and their vectors. Never the file itself, and nothing outside the database: deleting the conversation deletes its
attachments in the same transaction (a foreign key with ON DELETE CASCADE)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.shared.database import Database
from models.shared.errors import ConversationNotFound
from rag.attachments import AttachedPassage, ReadAttachment

if TYPE_CHECKING:
    pass

# Files one conversation may hold: each is searched or read whole for every question asked in it.
MAX_ATTACHMENTS = 20


@dataclass(frozen=True)
class StoredAttachment:
    id: int
    file: ReadAttachment
    created_at: float


@dataclass(frozen=True)
class AttachmentSummary:
    """What the page lists for an attached file."""

    id: int
    name: str
    pages: int | None
    passages: int
    chars: int


class AttachmentStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    def add(self, conversation_id: str, file: ReadAttachment) -> StoredAttachment:
        """Keep ``file`` with the conversation; the same content attached again is the attachment already kept."""
        import numpy as np

        passages = json.dumps([[p.index, p.text, p.page, p.section] for p in file.passages])
        vectors = np.ascontiguousarray(file.vectors, dtype=np.float32)
        now = time.time()
        with self._database.transaction() as db:
            if db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is None:
                raise ConversationNotFound(
                    "That conversation was deleted.", "Start a new chat and attach the file there."
                )
            same = db.execute(
                "SELECT id, created_at FROM attachments WHERE conversation_id = ? AND sha256 = ?",
                (conversation_id, file.sha256),
            ).fetchone()
            if same is not None:
                return StoredAttachment(int(same[0]), file, float(same[1]))
            cursor = db.execute(
                "INSERT INTO attachments (conversation_id, name, sha256, text, pages, passages, vectors, dimension, "
                "embedder, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    conversation_id,
                    file.name,
                    file.sha256,
                    file.text,
                    file.pages,
                    passages,
                    vectors.tobytes(),
                    int(vectors.shape[1]) if vectors.ndim == 2 else 0,
                    file.embedder,
                    now,
                ),
            )
            return StoredAttachment(int(cursor.lastrowid or 0), file, now)

    def summaries(self, conversation_id: str) -> list[AttachmentSummary]:
        rows = self._database.rows(
            "SELECT id, name, pages, json_array_length(passages), length(text) FROM attachments "
            "WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        )
        return [AttachmentSummary(int(r[0]), r[1], r[2], int(r[3]), int(r[4])) for r in rows]

    def load(self, conversation_id: str) -> list[StoredAttachment]:
        """Every file attached to the conversation, oldest first, as searching and reading whole need them."""
        rows = self._database.rows(
            "SELECT id, name, sha256, text, pages, passages, vectors, dimension, embedder, created_at "
            "FROM attachments WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        )
        return [_attachment(row) for row in rows]

    def remove(self, conversation_id: str, attachment_id: int) -> None:
        with self._database.transaction() as db:
            db.execute("DELETE FROM attachments WHERE id = ? AND conversation_id = ?", (attachment_id, conversation_id))


def _attachment(row: tuple[object, ...]) -> StoredAttachment:
    import numpy as np

    attachment_id, name, sha256, text, pages, passages_json, blob, dimension, embedder, created_at = row
    passages = tuple(
        AttachedPassage(int(index), str(body), page, section)
        for index, body, page, section in json.loads(str(passages_json))
    )
    width = int(str(dimension)) or 1
    vectors = np.frombuffer(bytes(blob), dtype=np.float32).reshape(-1, width)  # type: ignore[call-overload]
    file = ReadAttachment(str(name), str(sha256), str(text), pages, passages, vectors, str(embedder))  # type: ignore[arg-type]
    return StoredAttachment(int(str(attachment_id)), file, float(str(created_at)))
