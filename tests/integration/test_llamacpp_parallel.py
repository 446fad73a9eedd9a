"""Parallel answers on the real embedded SmolLM2-135M: several streams at once, each as if it were alone.

"The same as alone" is asserted exactly, token for token, and it holds because the scheduler keeps batching from
changing a token's arithmetic: answer tokens are evaluated one per sequence, and a prompt is never read in a
one-token piece (llama.cpp's CPU kernels sum a lone token's attention in another order; see
``backends.llamacpp.batch_policy``). Without that rule, cached and cold prompts gave different greedy answers here, and
so did prompts read in the same llama_decode as other slots' answer tokens. One thing still varies with the
neighbours: a step's output projection has as many rows as slots writing. On this project's AVX2 machines its
logits were bit-identical for 1, 2 and 4 rows; other weight types or instruction sets may route several rows
through other kernels (llamafile's, repacked Q4_0) and differ in the last bits, as llama.cpp's server warns.
"""

from __future__ import annotations

import gc
import logging
import re
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends.base import (
    CancelToken,
    ChatEvent,
    ChatMessage,
    Finished,
    GenerationParams,
    LoadOptions,
    TextDelta,
    Usage,
)
from backends.llamacpp.backend import LlamaCppBackend
from backends.llamacpp.buffers import open_llama
from backends.llamacpp.native import BATCH_TOKENS
from backends.memory import MIB, estimate_llamacpp
from models.gguf import ModelInfo
from models.shared.errors import ContextTooLong, GenerationError

pytestmark = pytest.mark.integration

SLOTS = 4
CONTEXT = 1024
GREEDY = GenerationParams(temperature=0.0, max_new_tokens=40, repeat_penalty=1.0)
QUESTIONS = (
    "Name three colours of the rainbow.",
    "Why is the sky blue?",
    "Give me three tips for writing clear emails.",
    "What is the difference between a list and a tuple in Python?",
    "Describe how a bicycle gear system works.",
)
# Greedy SmolLM2 keeps counting for hundreds of tokens: an answer that is surely still running later.
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"
LONG = GenerationParams(temperature=0.0, max_new_tokens=900, repeat_penalty=1.0)


def chat(question: str) -> list[ChatMessage]:
    return [ChatMessage("system", "You are a helpful assistant."), ChatMessage("user", question)]


@pytest.fixture(scope="module")
def parallel(model_info: ModelInfo) -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(CONTEXT, threads=2, seed=7, slots=SLOTS)))
    yield backend
    backend.close()


class Answer:
    """One stream read to its end: its text, usage and finish."""

    def __init__(self, events: list[ChatEvent]) -> None:
        self.text = "".join(e.text for e in events if isinstance(e, TextDelta))
        self.usage = next(e for e in events if isinstance(e, Usage))
        finished = events[-1]
        assert isinstance(finished, Finished)
        self.reason = finished.reason


def answer(backend: LlamaCppBackend, question: str, params: GenerationParams = GREEDY) -> Answer:
    return Answer(list(backend.stream_chat(chat(question), params, CancelToken())))


def together(calls: list[Callable[[], Answer]]) -> list[Answer]:
    """Start every call at the same moment, each on its own thread."""
    gate = threading.Barrier(len(calls))

    def run(call: Callable[[], Answer]) -> Answer:
        gate.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def read_until_text(stream: Iterator[ChatEvent], pieces: int) -> str:
    text = ""
    for event in stream:
        if isinstance(event, TextDelta):
            text += event.text
            pieces -= 1
            if pieces == 0:
                return text
    raise AssertionError("the stream ended early")


def test_the_loaded_model_reports_its_slots(parallel: LlamaCppBackend) -> None:
    assert parallel.slots == SLOTS
    assert parallel.context_length == CONTEXT
    assert parallel.capabilities.parallel and parallel.capabilities.multi_device
    assert parallel.capabilities.lora_hot_swap


def test_four_concurrent_greedy_answers_equal_the_answers_given_alone(parallel: LlamaCppBackend) -> None:
    alone = [answer(parallel, question) for question in QUESTIONS[:SLOTS]]
    at_once = together([lambda q=question: answer(parallel, q) for question in QUESTIONS[:SLOTS]])  # type: ignore[misc]
    assert [a.text for a in at_once] == [a.text for a in alone]
    assert all(a.text.strip() for a in alone)
    assert [a.usage.completion_tokens for a in at_once] == [a.usage.completion_tokens for a in alone]
    assert [a.usage.prompt_tokens for a in at_once] == [a.usage.prompt_tokens for a in alone]


def test_more_requests_than_slots_wait_their_turn_and_are_answered_the_same(parallel: LlamaCppBackend) -> None:
    """Five requests on four slots; meanwhile another thread keeps counting tokens, which only reads the
    vocabulary and so may run while the scheduler decodes."""
    alone = [answer(parallel, question) for question in QUESTIONS]
    expected = [parallel.count_chat_tokens(chat(question)) for question in QUESTIONS]
    counted: list[list[int]] = []
    done = threading.Event()

    def count_meanwhile() -> None:
        while not done.is_set():
            counted.append([parallel.count_chat_tokens(chat(question)) for question in QUESTIONS])

    counter = threading.Thread(target=count_meanwhile)
    counter.start()
    try:
        at_once = together([lambda q=question: answer(parallel, q) for question in QUESTIONS])  # type: ignore[misc]
    finally:
        done.set()
        counter.join()
    assert [a.text for a in at_once] == [a.text for a in alone]
    assert counted and all(counts == expected for counts in counted)


def test_requests_join_while_another_is_mid_answer(parallel: LlamaCppBackend) -> None:
    """Each question joins while a long answer is being written, and reads the rest of its prompt (its start
    is cached from answering it alone) between that answer's tokens. The long answer is still unfinished (it
    can be cancelled) when the question's answer has ended, and both say what they say alone. (Reading a
    prompt in the same llama_decode as another slot's answer token changed 5 of 8 such answers here.)"""
    params = GenerationParams(temperature=0.0, max_new_tokens=80, repeat_penalty=1.0)
    counting_alone = Answer(list(parallel.stream_completion(COUNTING, GenerationParams(0.0, 200, 1.0), CancelToken())))
    alone, joined = [], []
    for question in QUESTIONS:
        alone.append(answer(parallel, question, params))
        cancel = CancelToken()
        first = parallel.stream_completion(COUNTING, LONG, cancel)
        head = read_until_text(first, 3)
        joined.append(answer(parallel, question, params))
        cancel.cancel()
        first_answer = Answer(list(first))
        assert first_answer.reason == "cancelled"  # still running when the joining answer was done
        assert joined[-1].usage.cached_tokens > 0
        shown = head + first_answer.text
        common = min(len(shown), len(counting_alone.text))
        assert common >= len(head) and shown[:common] == counting_alone.text[:common]
    assert [a.text for a in joined] == [a.text for a in alone]
    assert all(a.text for a in alone)


def test_cancelling_one_stream_leaves_the_others_unchanged(parallel: LlamaCppBackend) -> None:
    alone = [answer(parallel, question) for question in QUESTIONS[:4]]
    cancel = CancelToken()

    def cancelled_one() -> Answer:
        events: list[ChatEvent] = []
        for event in parallel.stream_chat(chat(QUESTIONS[3]), GREEDY, cancel):
            events.append(event)
            if isinstance(event, TextDelta) and len(events) == 3:
                cancel.cancel()
        return Answer(events)

    calls: list[Callable[[], Answer]] = [lambda q=q: answer(parallel, q) for q in QUESTIONS[:3]]  # type: ignore[misc]
    *others, stopped = together([*calls, cancelled_one])
    assert stopped.reason == "cancelled"
    assert stopped.usage.completion_tokens < alone[3].usage.completion_tokens
    assert stopped.text and alone[3].text.startswith(stopped.text)
    assert [a.text for a in others] == [a.text for a in alone[:3]]


def test_an_answer_moved_to_close_a_gap_goes_on_unchanged(parallel: LlamaCppBackend, model_info: ModelInfo) -> None:
    """Three answers in slots 0, 1 and 2 of a fresh model; the one in slot 1 is cancelled, so the answer in
    slot 2 is moved into slot 1 (its cache copied) in the middle of its answer. It ends as it does alone."""
    params = GenerationParams(temperature=0.0, max_new_tokens=60, repeat_penalty=1.0)
    alone = answer(parallel, QUESTIONS[2], params)
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(512, threads=2, slots=3)))
    try:
        cancels = [CancelToken(), CancelToken()]
        counting = [backend.stream_completion(COUNTING, LONG, cancel) for cancel in cancels]
        for stream in counting:
            read_until_text(stream, 1)
        moved = backend.stream_chat(chat(QUESTIONS[2]), params, CancelToken())
        head = read_until_text(moved, 2)
        cancels[1].cancel()
        rest = Answer(list(moved))
        cancels[0].cancel()
        assert Answer(list(counting[0])).reason == "cancelled"
    finally:
        backend.close()
    assert head + rest.text == alone.text != ""


def test_a_new_conversation_copies_the_system_prompt_another_slot_read(
    parallel: LlamaCppBackend, model_info: ModelInfo
) -> None:
    """A second conversation takes the slot that never answered (the other holds too little of its prompt to be
    chosen), copies the system prompt's cache from the first one's slot instead of reading it, and answers as it
    does anywhere else, bit for bit."""
    long_question = (
        "Describe how a bicycle gear system works, and explain why riders change to a lower gear when they climb "
        "a steep hill on a windy day."
    )
    reference = answer(parallel, long_question)
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(512, threads=2, slots=2)))
    try:
        first = answer(backend, QUESTIONS[0])
        second = answer(backend, long_question)
    finally:
        backend.close()
    assert first.usage.cached_tokens == 0
    system_tokens = len(backend_tokens_of_system(model_info))
    assert 0 < second.usage.cached_tokens == system_tokens < second.usage.prompt_tokens / 2
    assert second.text == reference.text != ""


def test_two_new_conversations_at_once_both_copy_the_system_prompt(
    parallel: LlamaCppBackend, model_info: ModelInfo
) -> None:
    """Two new conversations arrive together while a free slot holds the system prompt: both copy it (when both are
    admitted in one round, the second waits a step for the first copy to be made, so no cache is loaded or saved
    under a copy still to come), and both answer as they do elsewhere."""
    questions = [f"{question} Answer in two sentences, and give one example of it." for question in QUESTIONS[1:3]]
    references = [answer(parallel, question) for question in questions]
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(512, threads=2, slots=3)))
    try:
        answer(backend, QUESTIONS[0])
        both = together([lambda q=question: answer(backend, q) for question in questions])  # type: ignore[misc]
    finally:
        backend.close()
    system_tokens = len(backend_tokens_of_system(model_info))
    assert [a.usage.cached_tokens for a in both] == [system_tokens, system_tokens]
    assert [a.text for a in both] == [a.text for a in references]


def backend_tokens_of_system(model_info: ModelInfo) -> list[int]:
    """The tokens two chats with this module's system prompt share: the prompt up to the user's words."""
    from backends.chat_template import ChatFormatter
    from backends.llamacpp.native import Vocabulary

    formatter = ChatFormatter(model_info.chat_template, model_info.bos_token, model_info.eos_token)
    vocabulary = Vocabulary(model_info.path)
    try:
        left, right = (vocabulary.tokenize(formatter.render_chat(chat(q)), True) for q in ("alpha", "omega"))
    finally:
        vocabulary.close()
        formatter.close()
    shared = 0
    while left[shared] == right[shared]:
        shared += 1
    return left[:shared]


def test_an_abandoned_generator_frees_its_slot(parallel: LlamaCppBackend) -> None:
    """All four slots busy with long answers; two readers walk away (one closes its generator, the other drops
    it). Two new requests are answered while the other two long answers are still running."""
    cancels = [CancelToken() for _ in range(SLOTS)]
    streams = [parallel.stream_completion(COUNTING, LONG, cancel) for cancel in cancels]
    for stream in streams:
        read_until_text(stream, 2)
    closing = streams[0]
    assert isinstance(closing, Generator)
    closing.close()
    dropped = streams.pop(1)
    del dropped
    gc.collect()
    alone = answer(parallel, QUESTIONS[0], GenerationParams(0.0, 8, repeat_penalty=1.0))
    fifth, sixth = together([lambda: answer(parallel, QUESTIONS[0], GenerationParams(0.0, 8, repeat_penalty=1.0))] * 2)
    assert fifth.text == sixth.text == alone.text != ""
    for cancel in cancels:
        cancel.cancel()
    for stream in streams[1:]:
        assert Answer(list(stream)).reason == "cancelled"  # still running: the new ones took the freed slots


def test_a_shared_prefix_is_reused_and_the_answer_is_the_same_as_cold(
    parallel: LlamaCppBackend, model_info: ModelInfo
) -> None:
    document = " ".join(f"Line {n}: the lighthouse keeper wrote down the weather at dusk." for n in range(20))
    system = ChatMessage("system", "Answer from this log.\n" + document)
    first = [system, ChatMessage("user", "What did the keeper write down?")]
    second = [system, ChatMessage("user", "When did the keeper write?")]

    cold_backend = LlamaCppBackend()
    list(cold_backend.load(model_info, LoadOptions(CONTEXT, threads=2, slots=1)))
    try:
        cold = Answer(list(cold_backend.stream_chat(second, GREEDY, CancelToken())))
    finally:
        cold_backend.close()
    assert cold.usage.cached_tokens == 0

    Answer(list(parallel.stream_chat(first, GREEDY, CancelToken())))
    warm = Answer(list(parallel.stream_chat(second, GREEDY, CancelToken())))
    assert warm.usage.cached_tokens >= parallel.count_tokens(document)
    assert warm.usage.prompt_tokens - warm.usage.cached_tokens < 30  # only the new question is read
    assert warm.text == cold.text != ""


def test_stop_strings_end_the_answer_before_them(parallel: LlamaCppBackend) -> None:
    full = answer(parallel, QUESTIONS[1])
    words = re.findall(r"\w+ \w+", full.text)
    stop = words[len(words) // 2]  # two words from the middle: it straddles tokens
    assert stop in full.text
    stopped = answer(
        parallel, QUESTIONS[1], GenerationParams(0.0, GREEDY.max_new_tokens, repeat_penalty=1.0, stop=("zzz", stop))
    )
    assert stopped.reason == "stop"
    assert stopped.text == full.text[: full.text.index(stop)]
    assert stop not in stopped.text


def test_stream_completion_continues_raw_text_as_llamacpp_does(
    parallel: LlamaCppBackend, model_info: ModelInfo
) -> None:
    prompt = "The lighthouse keeper climbed the stairs and"
    ours = Answer(list(parallel.stream_completion(prompt, GREEDY, CancelToken())))
    raw = open_llama(model_path=str(model_info.path), n_ctx=CONTEXT, n_threads=2, flash_attn=True, verbose=False)
    try:
        result = raw.create_completion(prompt, max_tokens=GREEDY.max_new_tokens, temperature=0.0)
    finally:
        raw.close()
    assert isinstance(result, dict)
    assert ours.text == result["choices"][0]["text"] != ""
    assert ours.usage.prompt_tokens == result["usage"]["prompt_tokens"]
    assert ours.usage.completion_tokens == result["usage"]["completion_tokens"]


def test_seeded_sampling_in_parallel_equals_seeded_sampling_alone(parallel: LlamaCppBackend) -> None:
    """Each answer has its own sampler chain: neither its random draws nor its repeat penalty are shared."""
    params = [GenerationParams(temperature=1.0, max_new_tokens=24, seed=seed) for seed in (11, 12, 13)]
    alone = [answer(parallel, QUESTIONS[2], p) for p in params]
    at_once = together([lambda p=p: answer(parallel, QUESTIONS[2], p) for p in params])  # type: ignore[misc]
    assert [a.text for a in at_once] == [a.text for a in alone]
    assert len({a.text for a in alone}) > 1


def test_a_prompt_longer_than_one_slot_is_refused_before_it_is_queued(parallel: LlamaCppBackend) -> None:
    huge = chat("lighthouse " * 1500)
    tokens = parallel.count_chat_tokens(huge)
    assert CONTEXT < tokens < CONTEXT * SLOTS  # the whole cache would hold it; one slot does not
    stream = parallel.stream_chat(huge, GREEDY, CancelToken())
    with pytest.raises(ContextTooLong) as caught:
        next(stream)
    assert str(CONTEXT) in caught.value.message
    assert answer(parallel, QUESTIONS[0]).text  # nothing was left waiting


def test_close_ends_running_answers_as_cancelled(model_info: ModelInfo) -> None:
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(512, threads=2, slots=2)))
    stream = backend.stream_completion(COUNTING, LONG, CancelToken())
    read_until_text(stream, 2)
    closer = threading.Thread(target=backend.close)
    closer.start()
    rest = list(stream)
    closer.join()
    assert isinstance(rest[-1], Finished) and rest[-1].reason == "cancelled"
    backend.close()
    assert backend.context_length == 0


class StopWhileReading(CancelToken):
    """Stop pressed while llama.cpp reads the ``n``-th piece of a prompt: the token reads as cancelled from the
    first time llama.cpp's abort callback asks about it during the ``n``-th call that has the callback on (the
    scheduler's own checks between steps come first and see it still wanted)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self._n = n
        self._calls = 0
        self._in_call = False
        self._pressed = False

    @property
    def cancelled(self) -> bool:
        in_callback = _asked_by_abort_callback()
        if in_callback and not self._in_call:
            self._calls += 1
        self._in_call = in_callback
        self._pressed = self._pressed or (in_callback and self._calls >= self._n)
        return self._pressed or super().cancelled


def _asked_by_abort_callback() -> bool:
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return False
        if frame.f_code.co_name == "_should_abort":
            return True
        frame = frame.f_back
    return False


def test_cancelling_in_the_middle_of_a_long_prompt_keeps_what_was_read(model_info: ModelInfo) -> None:
    """The prompt spans several chunks; Stop lands while llama.cpp reads the second. The evaluation stops there,
    and the next identical request reuses the first chunk (read before the Stop) and answers exactly as a cold
    read of the whole prompt does: nothing the aborted call half-wrote is reused."""
    long_prompt = chat("Summarise this: " + "the keeper lit the lamp at dusk. " * 120)
    backends = [LlamaCppBackend(), LlamaCppBackend()]
    for backend in backends:
        list(backend.load(model_info, LoadOptions(2048, threads=2, slots=1)))
    try:
        cold = Answer(list(backends[1].stream_chat(long_prompt, GREEDY, CancelToken())))
        partial = Answer(list(backends[0].stream_chat(long_prompt, GREEDY, StopWhileReading(2))))
        resumed = Answer(list(backends[0].stream_chat(long_prompt, GREEDY, CancelToken())))
    finally:
        for backend in backends:
            backend.close()
    assert cold.usage.prompt_tokens > BATCH_TOKENS  # more than one chunk
    assert (partial.reason, partial.usage.completion_tokens, partial.text) == ("cancelled", 0, "")
    assert resumed.usage.cached_tokens == BATCH_TOKENS  # the first chunk, read before the Stop
    assert resumed.text == cold.text != ""


def test_a_refused_batch_ends_that_answer_with_an_error_and_the_engine_keeps_serving(model_info: ModelInfo) -> None:
    """Real llama.cpp refuses a batch whose positions do not follow what its cache holds. Dropping the cached
    tokens behind the scheduler's back (the one white-box step here) makes the next prefix reuse such a batch."""
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(512, threads=2, slots=1)))
    try:
        first = answer(backend, QUESTIONS[0])
        engine = backend._engine
        assert engine is not None
        engine.forget(0, from_position=5)
        with pytest.raises(GenerationError) as caught:
            answer(backend, QUESTIONS[0])
        assert caught.value.remedy
        again = answer(backend, QUESTIONS[0])
        assert again.usage.cached_tokens == 0  # the broken sequence was cleared, not reused
        assert again.text == first.text != ""
    finally:
        backend.close()


def test_kv_cache_is_allocated_per_slot_as_the_memory_plan_says(
    model_info: ModelInfo, caplog: pytest.LogCaptureFixture
) -> None:
    """Each slot's cache is a whole context's; the compute buffer is shared (llama.cpp's own log lines)."""
    caplog.set_level(logging.DEBUG, logger="llama.cpp")
    backend = LlamaCppBackend()
    try:
        list(backend.load(model_info, LoadOptions(2048, threads=2, slots=SLOTS)))
    finally:
        backend.close()
    buffers = re.compile(r"^\S+:\s+\S+\s+(model |output |KV |compute )?buffer size =\s+([\d.]+) MiB")
    sizes = [(m.group(1), float(m.group(2))) for r in caplog.records if (m := buffers.match(r.getMessage().strip()))]
    kv_mib = sum(size for kind, size in sizes if kind == "KV ")
    assert kv_mib > 0, "llama.cpp reported no KV buffer"
    estimate = estimate_llamacpp(model_info, 2048, SLOTS)
    assert estimate.kv_cache_bytes == SLOTS * estimate_llamacpp(model_info, 2048).kv_cache_bytes
    assert abs(estimate.kv_cache_bytes / MIB - kv_mib) / kv_mib <= 0.02
    total_mib = sum(size for _, size in sizes)
    assert abs(estimate.total_bytes / MIB - total_mib) / total_mib <= 0.15
