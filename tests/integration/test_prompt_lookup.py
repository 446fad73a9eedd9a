"""Prompt-lookup decoding on the real embedded SmolLM2-135M: guesses from the prompt, checked in the same
llama_decode, give the text decoding one token at a time gives, greedy and seeded, and the guesses the model did not
agree with leave nothing behind in the slot's cache.

Exactly the same text needs attention that sums a position the same way whether it is evaluated alone or with the
guesses after it. llama.cpp's flash attention does (each query row on its own), and Hearth's contexts use it; so do
this model's Q4_1 matrix products (other weight types take another kernel for several tokens, and drift). Every test
here asserts identity, with the default f16 cache and with a quantized one. (Without flash attention a position
evaluated with others got logits up to 0.2 off here, and long answers drifted.)

Each answer here starts from empty caches. Identity holds for one way of reading a prompt: on some CPUs (AVX2
without AVX-512, seen in CI) a prompt read in one piece and the same prompt read after a cached prefix give logits
that differ in the last bits, and a greedy answer of this small model can turn on them. Which prefix a slot holds
depends on the tests that ran before, so the comparisons here never inherit it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest

from backends.base import CancelToken, ChatMessage, Finished, GenerationParams, LoadOptions, TextDelta, Usage
from backends.llamacpp.backend import LlamaCppBackend
from models.gguf import ModelInfo

pytestmark = pytest.mark.integration

PASSAGE = (
    "The package database of dpkg lives in /var/lib/dpkg. Each installed package has a list of its files in "
    "/var/lib/dpkg/info/PACKAGE.list, and the status of every package is kept in /var/lib/dpkg/status."
)
# Prompts whose answers copy from the prompt (where lookup guesses well) and one that copies nothing.
PROMPTS = (
    f"Passage: {PASSAGE}\n\nQuote the sentence of the passage that says where the status is kept, word for word.",
    f"Passage: {PASSAGE}\n\nRepeat the passage exactly.",
    "Write a short poem about the sea.",
)
GREEDY = GenerationParams(temperature=0.0, max_new_tokens=80, repeat_penalty=1.0)


@pytest.fixture(scope="module")
def backend(model_info: ModelInfo) -> Iterator[LlamaCppBackend]:
    loaded = LlamaCppBackend()
    list(loaded.load(model_info, LoadOptions(1024, threads=2, seed=7, slots=2)))
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def quantized_backend(model_info: ModelInfo) -> Iterator[LlamaCppBackend]:
    loaded = LlamaCppBackend()
    list(loaded.load(model_info, LoadOptions(1024, threads=2, seed=7, slots=2, kv_cache_type="q8_0")))
    yield loaded
    loaded.close()


def _settle(backend: LlamaCppBackend) -> None:
    """Wait until the last answer's slot is released (the scheduler thread lets go of it just after the answer's
    last event), so the next answer may reuse that slot's cache."""
    scheduler = backend._scheduler
    assert scheduler is not None
    deadline = time.monotonic() + 30
    while any(slot.answer is not None for slot in scheduler._slots):
        assert time.monotonic() < deadline, "an answer's slot was never released"
        time.sleep(0.01)


def _forget_caches(backend: LlamaCppBackend) -> None:
    """Empty every slot's llama.cpp cache and the scheduler's record of it."""
    _settle(backend)
    engine, scheduler = backend._engine, backend._scheduler
    assert engine is not None and scheduler is not None
    for slot in scheduler._slots:
        engine.forget(slot.index)
        slot.cached.clear()


def _answer(
    backend: LlamaCppBackend,
    prompt: str,
    params: GenerationParams,
    before: tuple[ChatMessage, ...] = (),
    caches: str = "emptied",
) -> tuple[str, Usage]:
    """One answer, from empty caches, after the caches the last answer left ("kept"), or at once ("as they are":
    for answers written together)."""
    if caches == "emptied":
        _forget_caches(backend)
    elif caches == "kept":
        _settle(backend)
    messages = [ChatMessage("system", "You are a helpful assistant."), *before, ChatMessage("user", prompt)]
    events = list(backend.stream_chat(messages, params, CancelToken()))
    assert isinstance(events[-1], Finished)
    usage = next(e for e in events if isinstance(e, Usage))
    return "".join(e.text for e in events if isinstance(e, TextDelta)), usage


@pytest.mark.parametrize("prompt", PROMPTS, ids=["quote", "repeat", "poem"])
def test_greedy_text_is_the_same_with_and_without_lookup(backend: LlamaCppBackend, prompt: str) -> None:
    plain, plain_usage = _answer(backend, prompt, GREEDY)
    looked, usage = _answer(backend, prompt, dataclasses.replace(GREEDY, prompt_lookup=True))
    assert looked == plain and plain.strip()
    assert usage.completion_tokens == plain_usage.completion_tokens
    assert plain_usage.drafted_tokens == 0  # not asked for
    assert usage.accepted_tokens <= usage.drafted_tokens


@pytest.mark.parametrize("prompt", PROMPTS, ids=["quote", "repeat", "poem"])
def test_greedy_text_is_the_same_with_a_quantized_cache(quantized_backend: LlamaCppBackend, prompt: str) -> None:
    plain, _ = _answer(quantized_backend, prompt, GREEDY)
    looked, usage = _answer(quantized_backend, prompt, dataclasses.replace(GREEDY, prompt_lookup=True))
    assert looked == plain and usage.accepted_tokens <= usage.drafted_tokens


def test_an_answer_that_copies_its_passage_keeps_most_guesses(backend: LlamaCppBackend) -> None:
    _, usage = _answer(backend, PROMPTS[1], dataclasses.replace(GREEDY, prompt_lookup=True))
    assert usage.drafted_tokens > 0
    assert usage.accepted_tokens > usage.completion_tokens / 3  # many tokens written without a step of their own


def test_a_seeded_sampled_answer_makes_the_same_draws_with_lookup(backend: LlamaCppBackend) -> None:
    sampled = GenerationParams(temperature=0.8, max_new_tokens=60, seed=11, repeat_penalty=1.1)
    plain, _ = _answer(backend, PROMPTS[1], sampled)
    looked, usage = _answer(backend, PROMPTS[1], dataclasses.replace(sampled, prompt_lookup=True))
    assert looked == plain and usage.drafted_tokens > 0


def test_the_rejected_guesses_leave_the_cache_holding_exactly_the_answer(backend: LlamaCppBackend) -> None:
    """After answers with guesses the model did not agree with, each slot's llama.cpp cache ends where the tokens
    the scheduler counts as cached end (a guess left behind would be read by every later token), and a follow-up
    that reuses the cache is answered as without lookup."""
    import llama_cpp

    looked = dataclasses.replace(GREEDY, prompt_lookup=True)
    answers = [(prompt, *_answer(backend, prompt, looked)) for prompt in PROMPTS]
    # Which answers have guesses the model turns down depends on the CPU's last bits; every set of prompts tried
    # had at least one (the poem most often).
    prompt, first, first_usage = next((a for a in answers if a[2].drafted_tokens > a[2].accepted_tokens), answers[-1])
    _answer(backend, prompt, looked)  # the caches of that answer alone, as it left them
    assert first_usage.drafted_tokens > first_usage.accepted_tokens  # some guesses were dropped
    engine, scheduler = backend._engine, backend._scheduler  # what llama.cpp holds is what is checked
    assert engine is not None and scheduler is not None
    for slot in scheduler._slots:
        assert llama_cpp.llama_memory_seq_pos_max(engine.memory, slot.index) == len(slot.cached) - 1
    before = (ChatMessage("user", prompt), ChatMessage("assistant", first))
    again, usage = _answer(backend, "Now make it rhyme.", looked, before, caches="kept")
    _answer(backend, prompt, looked)  # the same caches again, for the answer without lookup to read after
    plain, _ = _answer(backend, "Now make it rhyme.", GREEDY, before, caches="kept")
    assert usage.cached_tokens > first_usage.prompt_tokens and again == plain


def test_answers_written_together_draft_only_while_alone_and_keep_their_text(backend: LlamaCppBackend) -> None:
    """Two answers at once: while both are written, one step carries both tokens and no guesses; when one ends the
    other drafts again. Each text is what it is alone."""
    from concurrent.futures import ThreadPoolExecutor

    looked = dataclasses.replace(GREEDY, prompt_lookup=True)
    alone = [_answer(backend, prompt, GREEDY)[0] for prompt in PROMPTS[:2]]
    _forget_caches(backend)
    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(lambda prompt: _answer(backend, prompt, looked, caches="as they are"), PROMPTS[:2]))
    assert [text for text, _ in together] == alone
    assert all(usage.accepted_tokens <= usage.drafted_tokens for _, usage in together)
