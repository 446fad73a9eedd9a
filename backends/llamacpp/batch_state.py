"""What the llama.cpp scheduler (``backends.llamacpp.batch``) keeps per request, per answer and per slot, and how an
answer begins and what it used."""

from __future__ import annotations

import codecs
import queue
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from backends.base import AdapterUse, CancelToken, ChatEvent, GenerationParams, Usage
from backends.llamacpp.caches.prompt_spans import Span
from backends.llamacpp.prompt_lookup import PromptLookup
from backends.llamacpp.sampling import PENALTY_LAST_N, SamplerChain, sampler_steps
from backends.stops import StopScanner
from models.shared.errors import HearthError

if TYPE_CHECKING:
    from backends.llamacpp.native import NativeModel

Outcome = ChatEvent | HearthError


@dataclass(eq=False)
class Request:
    """One answer asked for: the caller reads ``events`` until a ``Finished`` (or an error) arrives."""

    prompt: list[int]
    params: GenerationParams
    cancel: CancelToken
    started: float  # time.perf_counter() when the caller asked
    events: queue.SimpleQueue[Outcome] = field(default_factory=queue.SimpleQueue)
    spans: tuple[Span, ...] = ()  # where the prompt's passages lie (``GenerationParams.passages``), in order
    _abandoned: threading.Event = field(default_factory=threading.Event)

    def abandon(self) -> None:
        """The reader is gone (its generator was closed or collected): stop writing at the next step."""
        self._abandoned.set()

    def unwanted(self) -> bool:  # a method, so that llama.cpp's abort callback can ask it
        return self.cancel.cancelled or self._abandoned.is_set()


@dataclass(eq=False)
class Answer:
    """What one request's answer needs while a slot writes it."""

    request: Request
    admitted: int  # arrival order, for first-come prompt reading
    pending: list[int]  # prompt tokens still to read
    sampler: SamplerChain
    decoder: codecs.IncrementalDecoder
    scanner: StopScanner
    budget: int  # most tokens it may write
    reused: int  # prompt tokens found in the slot's cache
    next_token: int | None = None  # sampled and shown, to be evaluated in the next step
    produced: int = 0
    first_token_at: float | None = None
    lookup: PromptLookup | None = None  # guesses of the next tokens, when the request asked for prompt lookup
    joined: int = 0  # passage tokens joined from kept caches instead of read
    spans_seen: int = 0  # of the request's spans, how many are behind the slot's cache (joined, read or reused)


@dataclass(eq=False)
class Slot:
    """One KV sequence (seq_id == index), what it caches, and the answer it is writing, if any."""

    index: int
    cached: list[int] = field(default_factory=list)  # exactly the tokens in this sequence's KV cache
    last_used: int = 0  # the step its last answer ended
    answer: Answer | None = None
    adapter: AdapterUse | None = None  # the adapter its cache was computed with (a cache is good only under it)
    owner: str = ""  # the conversation its cache belongs to (``GenerationParams.cache_owner``)


def open_answer(request: Request, engine: NativeModel, seed: int, admitted: int, reused: int) -> Answer:
    """The answer a slot starts writing for ``request``, whose first ``reused`` prompt tokens its cache holds."""
    params = request.params
    sampler = SamplerChain(sampler_steps(params, seed), engine.vocab_size, params.grammar, engine.vocab)
    sampler.accept(request.prompt[-PENALTY_LAST_N:])
    lookup = params.prompt_lookup and params.grammar is None and engine.can_trim
    return Answer(
        request=request,
        admitted=admitted,
        pending=request.prompt[reused:],
        sampler=sampler,
        decoder=codecs.getincrementaldecoder("utf-8")(errors="replace"),
        scanner=StopScanner(params.stop),
        budget=min(params.max_new_tokens, engine.shape.context_length - len(request.prompt)),
        reused=reused,
        lookup=PromptLookup.over(request.prompt) if lookup else None,
    )


def usage_of(request: Request, answer: Answer | None, finished: float) -> Usage:
    """What ``request`` used, ending at ``finished`` (perf_counter); ``answer`` is None when it never reached a slot."""
    first_token_at = answer.first_token_at if answer else None
    return Usage(
        prompt_tokens=len(request.prompt),
        completion_tokens=answer.produced if answer else 0,
        time_to_first_token_ms=((first_token_at or finished) - request.started) * 1000,
        total_ms=(finished - request.started) * 1000,
        cached_tokens=answer.reused if answer else 0,
        drafted_tokens=answer.lookup.drafted if answer and answer.lookup else 0,
        accepted_tokens=answer.lookup.accepted if answer and answer.lookup else 0,
        joined_tokens=answer.joined if answer else 0,
    )


def lone_prompt_piece(pieces: list[tuple[Slot, list[int]]]) -> Answer | None:
    """The answer whose prompt piece is the whole of this call, if it is one: the only call safe to abort (an
    answer-token call holds every writing slot's token)."""
    if len(pieces) != 1:
        return None
    answer = pieces[0][0].answer
    return answer if answer is not None and answer.next_token is None else None
