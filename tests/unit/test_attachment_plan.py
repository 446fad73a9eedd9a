"""Which attached files go whole and which are searched, how a use and a step are worded, and the search over
attached passages (pure logic: made-up vectors)."""

from __future__ import annotations

import numpy as np

from app.services.answering.attachment_plan import WHOLE_SHARE, AttachmentUse, plan_attachments, worth_counting
from rag.attachments import AttachedPassage, AttachProgress, Searchable, search_attachments, whole_text
from rag.reading.sections import Section


def test_files_go_whole_while_they_fit_in_their_share_of_the_room() -> None:
    room = 1000
    share = int(room * WHOLE_SHARE)
    assert plan_attachments([share], room) == ["whole"]
    assert plan_attachments([share + 1], room) == ["searched"]
    # A later, smaller file still fits after a larger one did not; one too long to count is searched.
    assert plan_attachments([400, 500, 300, None], room) == ["whole", "searched", "whole", "searched"]
    assert plan_attachments([], room) == []


def test_only_a_text_that_could_fit_is_counted() -> None:
    assert worth_counting(8000, 1000)
    assert not worth_counting(8001, 1000)


def test_uses_and_steps_are_worded_for_people() -> None:
    assert AttachmentUse("a.pdf", "whole").words == "a.pdf: whole file in context"
    assert AttachmentUse("a.pdf", "searched", 5).words == "a.pdf: searched, 5 passages used"
    assert AttachmentUse("a.pdf", "searched", 1).words == "a.pdf: searched, 1 passage used"
    assert AttachmentUse("a.pdf", "searched", 0).words == "a.pdf: searched, nothing matched"
    assert AttachProgress("a.pdf", "reading", 0, None).words == "Attaching a.pdf: reading"
    assert AttachProgress("a.pdf", "reading", 11, 50).words == "Attaching a.pdf: reading page 12 of 50"
    assert AttachProgress("a.pdf", "embedding", 150, 150).words == "Attaching a.pdf: embedding passage 150 of 150"


def test_the_whole_text_keeps_pages_and_headings() -> None:
    text = whole_text([Section("First.", page=1), Section("Second.", page=2), Section("Body.", section="Intro")])
    assert text == "(page 1)\nFirst.\n\n(page 2)\nSecond.\n\n## Intro\nBody."
    assert whole_text([Section("Plain."), Section("   ")]) == "Plain."


def _unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    return array / np.linalg.norm(array)


def test_search_fuses_words_and_vectors_across_files() -> None:
    first = Searchable(
        0,
        [
            AttachedPassage(0, "Tide tables for the harbour.", 1, None),
            AttachedPassage(1, "Part XR-7742 fits.", 2, None),
        ],
        np.stack([_unit([1, 0, 0]), _unit([0, 1, 0])]),
    )
    second = Searchable(1, [AttachedPassage(0, "Mooring fees are paid monthly.", None, "Fees")], _unit([0, 0, 1])[None])
    # The question's vector points at the fees passage; its exact code points at the part passage, which comes first.
    hits, took_ms = search_attachments([first, second], "Does XR-7742 fit, and what about fees?", _unit([0, 0.2, 1]), 2)
    assert [(h.attachment_id, h.passage.index) for h in hits] == [(0, 1), (1, 0)]
    assert took_ms >= 0
    assert search_attachments([], "anything", _unit([1, 0, 0]), 3) == ([], 0.0)


def test_search_drops_near_duplicates() -> None:
    same = "The ferry leaves at nine every morning from the north quay."
    files = [
        Searchable(
            0, [AttachedPassage(0, same, 1, None), AttachedPassage(1, same, 2, None)], np.eye(2, 3, dtype=np.float32)
        )
    ]
    hits, _ = search_attachments(files, "When does the ferry leave?", _unit([1, 1, 0]), 5)
    assert len(hits) == 1
