from app.services.chat import TurnSaved, TurnStarted
from app.services.conversations import AnswerStats, StoredMessage
from app.services.runtime import RuntimeStatus
from app.ui.render import AnswerView, format_stats, neutralize_remote_media, sources_markdown, status_markdown
from backends.base import Finished, TextDelta, Usage
from rag.prompt import Source

STATS = AnswerStats(
    prompt_tokens=20,
    completion_tokens=12,
    time_to_first_token_ms=250.0,
    decode_tokens_per_s=88.4,
    finish_reason="stop",
)


def test_events_accumulate_into_cumulative_text() -> None:
    history = [{"role": "user", "content": "hi"}]
    view = AnswerView(list(history))
    frames = [
        view.apply(event)
        for event in (
            TurnStarted("c1", dropped_messages=0, prompt_tokens=5),
            TextDelta("Hel"),
            TextDelta("lo"),
            TextDelta(" there"),
            Usage(5, 3, 100.0, 130.0),
            Finished("stop"),
        )
    ]
    answers = [frame[-1]["content"] for frame in frames]
    assert answers[1:4] == ["Hel", "Hello", "Hello there"]
    assert frames[-1][:-1] == history
    assert view.conversation_id == "c1"
    assert view.finished == "stop"
    saved = view.apply(TurnSaved(StoredMessage(1, "assistant", "Hello there", STATS)))
    assert saved[-1]["content"].startswith("Hello there\n\n*0.25 s to first token")


def test_an_answer_stopped_before_it_began_says_so() -> None:
    view = AnswerView([])
    assert view.apply(TurnStarted("c1", 0, 5))[-1]["content"] == "…"
    view.apply(Usage(5, 0, 0.0, 10.0))
    assert view.apply(Finished("cancelled"))[-1]["content"] == "*Stopped before the answer began.*"


def test_dropped_history_becomes_a_visible_notice() -> None:
    view = AnswerView([])
    view.apply(TurnStarted("c1", dropped_messages=4, prompt_tokens=900))
    assert view.notices == ["4 earlier messages were left out so the conversation fits the model's context window."]


def test_stats_line_says_what_happened() -> None:
    assert format_stats(STATS) == "0.25 s to first token · 88.4 tokens/s · 12 tokens"
    stopped = AnswerStats(1, 2, 10.0, 5.0, "cancelled", dropped_messages=2)
    assert format_stats(stopped).endswith("stopped · 2 earlier messages left out to fit the context")


def test_remote_images_are_never_fetched() -> None:
    text = "see ![chart](https://evil.example/track.png) and <img src='http://x/y.gif'> but ![ok](local.png)"
    safe = neutralize_remote_media(text)
    assert "![chart]" not in safe
    assert "<img" not in safe
    assert "[image: chart] (https://evil.example/track.png)" in safe
    assert "![ok](local.png)" in safe


def test_status_line_for_each_state() -> None:
    assert "Model not loaded" in status_markdown(RuntimeStatus("error", "x.gguf", "File missing. Pick one."))
    assert "Loading" in status_markdown(RuntimeStatus("loading", "x", "Loading on CPU…"))


def test_raw_html_from_the_model_is_shown_as_text_but_code_is_left_as_typed() -> None:
    text = 'Try <iframe src="http://x"></iframe> or `a < b` and\n```html\n<b>bold</b>\n```\nend <video src=y>'
    safe = neutralize_remote_media(text)
    assert "<iframe" not in safe
    assert "&lt;iframe" in safe
    assert "&lt;video" in safe
    assert "`a < b`" in safe
    assert "```html\n<b>bold</b>\n```" in safe


def test_sources_show_file_place_and_passage_as_plain_text() -> None:
    sources = [
        Source(1, "/docs/guide.pdf", 3, None, "Tides ![x](http://evil/p.png) <script>alert(1)</script> *rise*"),
        Source(2, "/docs/notes.md", None, "Moon › Phases", "# Moon\n## Phases\nFull moon."),
    ]
    block = sources_markdown(sources)
    assert block.startswith("**Sources**")
    assert "<summary>[1] guide.pdf, page 3</summary>" in block
    assert "<summary>[2] notes.md, Moon › Phases</summary>" in block
    assert "![x]" not in block
    assert "<script>" not in block
    assert "\\*rise\\*" in block
    assert "Moon Phases Full moon\\." in block  # heading marks dropped, the words kept
    assert sources_markdown([]) == ""


def test_an_answer_from_documents_lists_its_sources_under_the_stats() -> None:
    source = Source(1, "/docs/guide.pdf", 3, None, "Built in 1852.")
    view = AnswerView([])
    view.apply(TurnStarted("c1", 0, 50, sources=(source,), retrieve_ms=42.0))
    view.apply(TextDelta("In 1852 [1]."))
    stats = AnswerStats(50, 5, 300.0, 80.0, "stop", retrieve_ms=42.0)
    content = view.apply(TurnSaved(StoredMessage(2, "assistant", "In 1852 [1].", stats, (source,))))[-1]["content"]
    body, stats_line, listed = content.split("\n\n", 2)
    assert body == "In 1852 [1]."
    assert stats_line.startswith("*42 ms to find sources · 0.30 s to first token")
    assert listed.startswith("**Sources**") and "guide.pdf, page 3" in listed


def test_a_restarting_engine_shows_why_in_the_status_line() -> None:
    status = RuntimeStatus("restarting", "SmolLM2", "The model stopped unexpectedly (SIGKILL); it is restarting…")
    assert status_markdown(status) == "**SmolLM2** — The model stopped unexpectedly (SIGKILL); it is restarting…"


def test_an_interrupted_answer_keeps_its_text_and_says_why() -> None:
    view = AnswerView([{"role": "user", "content": "hi"}])
    view.apply(TurnStarted("c1", 0, 5))
    view.apply(TextDelta("Once upon"))
    view.interrupt("The model stopped unexpectedly (SIGKILL); it is restarting.")
    content = view.render()[-1]["content"]
    assert content.startswith("Once upon")
    assert content.endswith(r"*⚠ The model stopped unexpectedly \(SIGKILL\); it is restarting\.*")


def test_the_status_line_says_how_many_answers_run_at_once() -> None:
    from backends.memory import MemoryEstimate
    from backends.selection import BackendPlan

    plan = BackendPlan("llamacpp", "llama.cpp (CPU)", ("CPU",), 2, 2048, MemoryEstimate(0, 0, 0), ())
    line = status_markdown(RuntimeStatus("ready", "SmolLM2", "Ready", plan, slots=4))
    assert line.endswith("context 2048 tokens · offline · 4 answers at once")
    assert "answers at once" not in status_markdown(RuntimeStatus("ready", "SmolLM2", "Ready", plan, slots=1))
