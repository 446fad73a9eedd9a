"""The llama.cpp backend on the real embedded SmolLM2-135M GGUF."""

import logging
import threading

import pytest

from backends.base import CancelToken, ChatMessage, Finished, GenerationParams, LoadOptions, TextDelta, Usage
from backends.llamacpp.backend import LlamaCppBackend
from backends.llamacpp.buffers import open_llama
from models.gguf import ModelInfo
from models.shared.errors import ContextTooLong, ModelNotReady

pytestmark = pytest.mark.integration

QUESTION = [
    ChatMessage("system", "You are a helpful assistant."),
    ChatMessage("user", "Name three colours of the rainbow."),
]
GREEDY = GenerationParams(temperature=0.0, max_new_tokens=48, repeat_penalty=1.0)


def run(backend: LlamaCppBackend, params: GenerationParams, messages: list[ChatMessage] = QUESTION) -> list[object]:
    return list(backend.stream_chat(messages, params, CancelToken()))


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_streaming_yields_text_then_usage_then_finished(llama: LlamaCppBackend) -> None:
    events = run(llama, GREEDY)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3
    assert text_of(events).strip()
    usage, finished = events[-2], events[-1]
    assert isinstance(usage, Usage) and isinstance(finished, Finished)
    assert finished.reason in ("stop", "length")
    assert 0 < usage.completion_tokens <= GREEDY.max_new_tokens
    assert usage.time_to_first_token_ms > 0
    assert usage.decode_tokens_per_s > 0


def fresh_backend(model_info: ModelInfo) -> LlamaCppBackend:
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(context_length=2048, threads=2, seed=7)))
    return backend


def test_greedy_output_is_deterministic(model_info: ModelInfo) -> None:
    """Two independent loads give the same greedy answer, first from a cold cache, then from the prompt cache.

    (A cold evaluation and one that reuses cached prompt tokens may differ in the last bits of the logits, as in
    llama.cpp's server with prompt caching; determinism holds for the same cache state.)"""
    one, two = fresh_backend(model_info), fresh_backend(model_info)
    try:
        cold = [text_of(run(backend, GREEDY)) for backend in (one, two)]
        warm = [text_of(run(backend, GREEDY)) for backend in (one, two)]
    finally:
        one.close()
        two.close()
    assert cold[0] == cold[1] != ""
    assert warm[0] == warm[1] != ""


def test_sampling_with_a_seed_is_repeatable(llama: LlamaCppBackend) -> None:
    params = GenerationParams(temperature=1.0, max_new_tokens=24, seed=1234)
    assert text_of(run(llama, params)) == text_of(run(llama, params))


def test_cancel_stops_at_the_next_token(llama: LlamaCppBackend) -> None:
    cancel = CancelToken()
    long_answer = [ChatMessage("user", "Write a very long story about a lighthouse keeper and the sea.")]
    after_cancel = 0
    events = []
    for event in llama.stream_chat(long_answer, GenerationParams(temperature=0.7, max_new_tokens=400), cancel):
        events.append(event)
        if isinstance(event, TextDelta):
            if cancel.cancelled:
                after_cancel += 1
            elif len(events) == 5:
                stopper = threading.Thread(target=cancel.cancel)
                stopper.start()
                stopper.join()
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.reason == "cancelled"
    assert after_cancel <= 1  # one token takes ~10 ms here: generation ends well within a second
    usage = events[-2]
    assert isinstance(usage, Usage) and usage.completion_tokens < 20


def test_cancel_interrupts_a_long_prompt_evaluation_and_the_model_recovers(llama: LlamaCppBackend) -> None:
    before = text_of(run(llama, GREEDY))
    cancel = CancelToken()
    cancel.cancel()  # pressed Stop while llama.cpp is still reading the prompt
    long_prompt = [ChatMessage("user", "Summarise this: " + "the keeper lit the lamp at dusk. " * 200)]
    events = list(llama.stream_chat(long_prompt, GREEDY, cancel))
    assert not [e for e in events if isinstance(e, TextDelta)]
    finished, usage = events[-1], events[-2]
    assert isinstance(finished, Finished) and finished.reason == "cancelled"
    assert isinstance(usage, Usage) and usage.completion_tokens == 0
    assert text_of(run(llama, GREEDY)) == before  # the aborted evaluation left no stale cache behind


def test_stop_while_the_prompt_is_read_logs_no_error_and_the_model_stays_healthy(
    llama: LlamaCppBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """Stop aborts llama.cpp's evaluation of the prompt piece in flight (its abort callback); llama.cpp reports
    every abort as "llama_decode: failed to decode, ret = 2" at ERROR, which for a Stop is no failure."""
    before = text_of(run(llama, GREEDY))
    caplog.set_level(logging.DEBUG)
    long_prompt = "Summarise this: " + "the keeper lit the lamp at dusk. " * 200
    # The Stop must land while llama.cpp reads the prompt; later and later Stops until one does (the first, here).
    for attempt, delay_s in enumerate((0.05, 0.2, 0.5, 1.0, 2.0)):
        cancel = CancelToken()
        stopper = threading.Timer(delay_s, cancel.cancel)
        stopper.start()
        events = list(llama.stream_chat([ChatMessage("user", f"{attempt} {long_prompt}")], GREEDY, cancel))
        stopper.join()
        finished = events[-1]
        assert isinstance(finished, Finished) and finished.reason == "cancelled"
        if any("stopped reading the prompt" in r.getMessage() for r in caplog.records):
            break
    else:
        pytest.fail("no Stop landed while the prompt was read")
    errors = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == []
    assert any("failed to decode" in r.getMessage() for r in caplog.records)  # llama.cpp's line, kept at debug
    assert text_of(run(llama, GREEDY)) == before  # the aborted piece left nothing behind in the cache


def test_token_counts_match_llamacpp(model_info: ModelInfo) -> None:
    """Our prompt/completion counts equal what llama-cpp-python's own completion API reports."""

    llama = fresh_backend(model_info)
    try:
        events = run(llama, GREEDY)
        chat_tokens = llama.count_chat_tokens(QUESTION)
        word_tokens = llama.count_tokens("hello world")
    finally:
        llama.close()
    usage = events[-2]
    assert isinstance(usage, Usage)
    raw = open_llama(model_path=str(model_info.path), n_ctx=2048, n_threads=2, flash_attn=True, verbose=False)
    try:
        formatter_prompt = (
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nName three colours of the rainbow.<|im_end|>\n<|im_start|>assistant\n"
        )
        result = raw.create_completion(formatter_prompt, max_tokens=GREEDY.max_new_tokens, temperature=0.0)
    finally:
        raw.close()
    assert usage.prompt_tokens == result["usage"]["prompt_tokens"]
    assert usage.completion_tokens == result["usage"]["completion_tokens"]
    assert text_of(events) == result["choices"][0]["text"]
    assert chat_tokens == result["usage"]["prompt_tokens"]
    assert word_tokens == len(raw_tokens(model_info, "hello world"))


def raw_tokens(model_info: ModelInfo, text: str) -> list[int]:
    from llama_cpp import Llama

    vocab_only = Llama(model_path=str(model_info.path), vocab_only=True, verbose=False)
    try:
        return list(vocab_only.tokenize(text.encode(), add_bos=False, special=False))
    finally:
        vocab_only.close()


def test_prompt_longer_than_the_context_is_refused(llama: LlamaCppBackend) -> None:
    huge = [ChatMessage("user", "lighthouse " * 3000)]
    with pytest.raises(ContextTooLong) as caught:
        run(llama, GREEDY, huge)
    assert "2048" in caught.value.message


def test_answer_is_cut_when_the_context_fills(llama: LlamaCppBackend) -> None:
    nearly_full = [ChatMessage("user", "Continue counting: " + "one two three " * 640)]
    prompt_tokens = llama.count_chat_tokens(nearly_full)
    assert 2048 - prompt_tokens < 200
    events = run(llama, GenerationParams(temperature=0.0, max_new_tokens=1000), nearly_full)
    usage = events[-2]
    assert isinstance(usage, Usage)
    assert usage.prompt_tokens + usage.completion_tokens <= 2048


def test_close_is_idempotent_and_then_refuses_to_chat(model_info: ModelInfo) -> None:
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(context_length=512, threads=1)))
    assert backend.context_length == 512
    backend.close()
    backend.close()
    with pytest.raises(ModelNotReady):
        run(backend, GREEDY)


def test_reading_a_vocabulary_alone_prints_nothing_to_the_terminal(model_info: ModelInfo) -> None:
    """Tuning reads the model's vocabulary in the page's process, whose stderr is the terminal `hearth ui` runs in:
    llama.cpp's loading report (a hundred lines) goes to logging instead."""
    import subprocess
    import sys

    script = (
        "import sys; from pathlib import Path; from backends.llamacpp.native import Vocabulary; "
        "vocabulary = Vocabulary(Path(sys.argv[1])); print(len(vocabulary.tokenize('Hello there', False))); "
        "vocabulary.close()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(model_info.path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 0
    assert "llama_model_loader" not in done.stderr and "print_info" not in done.stderr, done.stderr[:500]
