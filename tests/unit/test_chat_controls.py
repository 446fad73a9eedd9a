"""Which chat buttons a tab offers, and the line above the chat that says where answers come from."""

import pytest

from app.ui.chat_controls import ChatControls, chat_controls
from app.ui.render import answering_from


@pytest.mark.parametrize(
    ("answering", "conversation_open", "expected"),
    [
        # While an answer is written, only Stop acts; nothing can start another answer or delete this one.
        (True, True, ChatControls(send=False, stop=True, regenerate=False, delete=False)),
        (True, False, ChatControls(send=False, stop=True, regenerate=False, delete=False)),
        # Idle: Send, and what needs an open conversation only when one is open.
        (False, True, ChatControls(send=True, stop=False, regenerate=True, delete=True)),
        (False, False, ChatControls(send=True, stop=False, regenerate=False, delete=False)),
    ],
)
def test_chat_controls(answering: bool, conversation_open: bool, expected: ChatControls) -> None:
    assert chat_controls(answering, conversation_open) == expected


def test_the_line_above_the_chat_names_the_collection_or_says_there_is_none() -> None:
    assert "without documents" in answering_from("")
    assert "without documents" in answering_from(None)
    line = answering_from("Coast & Kitchen: *notes*")
    assert line.startswith("Answering from **") and "\\*notes\\*" in line  # the name is shown as typed, not read
