"""What the Tuning tab says of the attached adapter."""

from __future__ import annotations

from app.ui.tuning_view import attached_line


def test_no_adapter_attached() -> None:
    assert attached_line(None, 1.0, False) == "No adapter is attached: answers come from the model as it is."


def test_an_adapter_for_the_model_in_use_is_used_at_its_scale() -> None:
    assert attached_line("support-tone", 0.5, True, "llama.cpp (CPU)") == "Answers use **support-tone** at scale 0.5."


def test_an_adapter_for_another_model_is_said_not_to_be_used() -> None:
    assert "attached to another model, so it is not used now" in attached_line("support-tone", 1.0, False)


def test_a_backend_that_cannot_answer_with_an_adapter_is_named_with_what_to_do() -> None:
    line = attached_line("support-tone", 1.0, True, "OpenVINO (NPU)", hot_swap=False)
    assert "runs on OpenVINO (NPU), which cannot answer with an adapter" in line
    assert "Choose llama.cpp in the Hardware tab" in line and "Detach" in line


def test_an_adapter_can_be_attached_for_every_answer_a_collection_or_a_recent_conversation() -> None:
    from app.ui.tuning_view import target_choices

    choices = target_choices(["manuals"], {"c2": "Newest chat", "c1": "Older chat"})
    assert choices == [
        ("Every answer", "model"),
        ("Collection: manuals", "collection:manuals"),
        ("Conversation: Newest chat", "conversation:c2"),
        ("Conversation: Older chat", "conversation:c1"),
    ]


def test_narrower_attachments_are_listed_and_one_for_another_model_says_it_is_unused() -> None:
    from app.ui.tuning_view import scoped_lines
    from models.adapters import Attachment

    attachments = [
        Attachment("tone", 1.0, "/m.gguf"),
        Attachment("facts", 0.5, "/m.gguf", "collection:manuals"),
        Attachment("old", 1.0, "/other.gguf", "conversation:c1"),
    ]
    lines = scoped_lines(attachments, {"c1": "Router reset"}, "/m.gguf").split("\n\n")
    assert lines == [
        "Answers from the collection “manuals” use **facts** at scale 0.5.",
        "Answers from the conversation “Router reset” use **old** at scale 1 "
        "(attached to another model: not used now).",
    ]
