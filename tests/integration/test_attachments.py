"""Files attached to one conversation, with the real model, reader process and MiniLM: given
whole when they fit, searched when they do not, cited, kept across a restart, deleted with the conversation, and
refused with a reason that keeps nothing."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.answering.chat import AttachmentRefused, ChatService, TurnSaved, TurnStarted
from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services
from app.services.library.attachment_store import AttachmentStore
from app.services.library.conversations import ConversationStore
from app.services.library.documents import DocumentServices
from app.settings import load_settings
from backends.base import CancelToken, GenerationParams, TextDelta
from rag.attachments import AttachProgress
from rag.prompt import WHOLE_FILE
from tests.document_bombs import write_nested_docx
from tests.helpers import write_pdf

pytestmark = pytest.mark.integration

PARAMS = GenerationParams(0.0, 48)
# Filler that pushes a file past what the 1024-token context can hold whole.
FILLER = [
    f"Section {n}. The harbour office keeps tide tables, mooring fees and the ferry timetable for season {n}."
    for n in range(1, 90)
]


def _service(chat: Services, documents: DocumentServices) -> ChatService:
    return ChatService(chat.store, chat.runtime, lambda: documents)


def _answer(events: Sequence[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_a_short_file_goes_to_the_model_whole_and_is_cited(
    chat: Services, documents: DocumentServices, tmp_path: Path
) -> None:
    note = tmp_path / "boat.txt"
    note.write_text("The boat Marigold is moored at pier 7. Its engine was serviced by Ewan Ross in March.")
    question = "Who serviced the engine of the Marigold?"
    events = list(_service(chat, documents).send(None, question, TurnSettings(PARAMS, ""), attach=[note]))
    assert any(isinstance(e, AttachProgress) and e.name == "boat.txt" for e in events)
    started = next(e for e in events if isinstance(e, TurnStarted))
    assert [u.words for u in started.attachments] == ["boat.txt: whole file in context"]
    assert started.sources[0].label == f"boat.txt · {WHOLE_FILE}"
    assert "Ewan Ross" in started.sources[0].text
    assert "Ross" in _answer(events)
    saved = events[-1]
    assert isinstance(saved, TurnSaved) and saved.message.stats is not None
    assert saved.message.stats.attachments == started.attachments
    stored = chat.store.get(started.conversation_id)
    assert stored.messages[0].content == question  # the file is not pasted into the question
    assert stored.messages[1].stats is not None and stored.messages[1].stats.attachments == started.attachments


def test_a_text_file_without_an_extension_is_read_as_text(
    chat: Services, documents: DocumentServices, tmp_path: Path
) -> None:
    licence = tmp_path / "LICENSE"
    licence.write_text("Permission is granted to copy this harbour guide, provided this notice is kept.\n")
    events = list(_service(chat, documents).send(None, "May I copy it?", TurnSettings(PARAMS, ""), attach=[licence]))
    started = next(e for e in events if isinstance(e, TurnStarted))
    assert [u.words for u in started.attachments] == ["LICENSE: whole file in context"]
    assert "Permission is granted" in started.sources[0].text
    assert isinstance(events[-1], TurnSaved)


def test_a_long_file_is_searched_and_survives_a_restart(
    chat: Services, documents: DocumentServices, tmp_path: Path, isolated_home: Path
) -> None:
    pages = [*FILLER[:40], "The harbour master in 2024 is Isla Munro, reached on channel 14.", *FILLER[40:]]
    pdf = write_pdf(tmp_path / "harbour.pdf", pages)
    events = list(
        _service(chat, documents).send(None, "Who is the harbour master?", TurnSettings(PARAMS, ""), attach=[pdf])
    )
    started = next(e for e in events if isinstance(e, TurnStarted))
    (use,) = started.attachments
    assert use.mode == "searched" and 0 < use.passages == len(started.sources)
    assert "Isla Munro" in started.sources[0].text
    assert started.sources[0].label.startswith("harbour.pdf · page ")
    steps = [e for e in events if isinstance(e, AttachProgress)]
    assert steps[0].step == "reading" and steps[-1].step == "embedding"
    assert steps[-1].total is not None and steps[-1].done == steps[-1].total > len(started.sources)

    # A new process: the same database opened again, the file still answers follow-ups in that conversation.
    chat.store.close()
    reopened = ConversationStore(resolve_data_paths(load_settings().home).conversations_db)
    try:
        again = ChatService(reopened, chat.runtime, lambda: documents)
        follow = list(again.send(started.conversation_id, "Which radio channel reaches her?", TurnSettings(PARAMS, "")))
        follow_start = next(e for e in follow if isinstance(e, TurnStarted))
        assert follow_start.attachments[0].name == "harbour.pdf"
        assert any("channel 14" in s.text for s in follow_start.sources)

        # Deleting the conversation deletes what it held of the file.
        reopened.delete(started.conversation_id)
        assert AttachmentStore(reopened.database).load(started.conversation_id) == []
        db = sqlite3.connect(resolve_data_paths(load_settings().home).conversations_db)
        assert db.execute("SELECT COUNT(*) FROM attachments").fetchone()[0] == 0
        db.close()
    finally:
        reopened.close()


def test_a_file_that_cannot_be_read_keeps_nothing(chat: Services, documents: DocumentServices, tmp_path: Path) -> None:
    from pypdf import PdfWriter

    locked = PdfWriter(clone_from=str(write_pdf(tmp_path / "plain.pdf", ["secret plans"])))
    locked.encrypt("pw")
    locked.write(str(tmp_path / "locked.pdf"))
    (tmp_path / "blob.txt").write_bytes(os.urandom(4000))
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(100))
    (tmp_path / "program").write_bytes(b"\x7fELF" + os.urandom(4000))  # no extension, and not text
    (tmp_path / ".hidden").write_text("a dot file")
    write_nested_docx(tmp_path / "nested.docx", 10_000_000)  # 160 KB on disk
    expected = {
        "nested.docx": "the mark of a 'zip bomb'",
        "locked.pdf": "encrypted",
        "blob.txt": "binary",
        "empty.txt": "empty",
        "photo.png": ".png is not supported",
        "program": "binary",
        ".hidden": "a hidden file is not supported",
        "missing.txt": "there is no such file",
        "": "folder",
    }
    service = _service(chat, documents)
    for name, reason in expected.items():
        with pytest.raises(AttachmentRefused) as refused:
            list(service.send(None, "What does it say?", TurnSettings(PARAMS, ""), attach=[tmp_path / name]))
        assert reason in refused.value.message, refused.value.message
        assert "Nothing was sent" in refused.value.remedy
    assert chat.store.list() == []


def test_cancel_while_attaching_keeps_nothing(chat: Services, documents: DocumentServices, tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "harbour.pdf", FILLER)
    cancel = CancelToken()
    events = _service(chat, documents).send(
        None, "Summarise it.", TurnSettings(PARAMS, ""), cancel=cancel, attach=[pdf]
    )
    first = next(events)
    assert isinstance(first, AttachProgress)
    cancel.cancel()
    assert not any(isinstance(e, TurnStarted) for e in events)
    assert chat.store.list() == []
