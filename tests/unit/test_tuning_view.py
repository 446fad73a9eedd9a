"""What the Tuning tab says of the attached adapter, and how its adapters table is laid out."""

from __future__ import annotations

from app.ui import tuning_view as view
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


def test_a_finished_runs_check_says_in_words_whether_the_model_predicts_the_answers_better() -> None:
    from app.ui.tuning_view import fit_words

    assert fit_words(2739.0, 57.0).startswith("The model now predicts the answers in your examples better: ")
    assert "perplexity 2739.00 → 57.00" in fit_words(2739.0, 57.0) and "lower is better" in fit_words(2739.0, 57.0)
    worse = fit_words(10.0, 12.0)
    assert "worse" in worse and "fewer epochs or a lower learning rate" in worse
    assert "about as well as before" in fit_words(10.0, 10.05)


def test_compare_says_why_when_both_answers_are_the_same_and_what_to_try() -> None:
    from app.ui.tuning_view import compare_note

    assert compare_note("Paris.", "Lyon.", 1.0) == ""
    assert compare_note("", "", 1.0) == ""  # nothing was written: nothing to explain
    same = compare_note("Paris.", "Paris. ", 1.0)
    assert same.startswith("**Both answers are the same**") and "scale" not in same
    # what to try: what measured better, never the Standard preset (2 of 12 where Quick taught 12 of 12)
    assert "more examples" in same and "more epochs" in same and "Standard" not in same
    assert "The scale is 0.3: at 1 the adapter counts in full." in compare_note("Paris.", "Paris.", 0.3)


def test_every_layer_an_adapter_can_change_has_words_and_the_settings_name_the_usual_groups() -> None:
    from app.ui.tuning_view import TARGET_WORDS
    from models.tuning.options import ALL_TARGETS, ATTENTION, MLP, TuneOptions, layers_in_words

    assert set(TARGET_WORDS) == set(ALL_TARGETS)
    assert all(name in TARGET_WORDS[name] for name in ALL_TARGETS)  # the code's name after the words
    assert layers_in_words(ATTENTION) == "attention layers" and layers_in_words(MLP) == "feed-forward layers"
    assert layers_in_words(ALL_TARGETS) == "every layer" and layers_in_words(("q_proj", "v_proj")) == "q_proj, v_proj"
    attention_only = TuneOptions(targets=ATTENTION).describe()
    assert "attention layers" in attention_only and "q_proj" not in attention_only
    assert "every layer" in TuneOptions().describe()


def test_a_running_runs_line_sets_the_checks_estimate_beside_what_its_steps_measure() -> None:
    from app.ui.tuning_view import progress_line
    from models.tuning.options import TuneOptions
    from models.tuning.runs import Job, RunView, StepPoint

    steps = (StepPoint(1, 2.0, 100.0, 10.0), StepPoint(3, 1.8, 100.0, 22.0))  # 6 s a step after the first
    running = RunView("running", total_steps=100, steps=steps)
    assert running.step_s == 6.0
    line = progress_line("r1", "house", running, estimated_s=240.0)
    assert (
        "The check estimated about 4 min for the run; its steps so far take about 6.0 s each, 10 min for the " in line
    )
    assert "Slower than estimated: other work on this computer shares its cores." in line
    on_time = progress_line("r1", "house", running, estimated_s=620.0)
    assert "10 min for the training." in on_time and "Slower" not in on_time
    assert "The check estimated" not in progress_line("r1", "house", running)  # started without a check
    one_step = RunView("running", total_steps=100, steps=steps[:1])
    assert one_step.step_s is None and "The check estimated" not in progress_line("r1", "h", one_step, 240.0)
    kept = Job("house", "/m.gguf", "0" * 64, "m", "d", TuneOptions(), 2, "/a", estimated_s=240.0)
    assert Job.from_json(kept.to_json()).estimated_s == 240.0
    assert Job.from_json(kept.to_json().replace('"estimated_s": 240.0', '"probe_steps": 0')).estimated_s is None


def test_the_adapters_table_gives_each_column_a_share_of_the_width() -> None:
    assert len(view.ADAPTER_WIDTHS) == len(view.ADAPTER_HEADERS)
    assert sum(int(width.removesuffix("%")) for width in view.ADAPTER_WIDTHS) == 100
