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
