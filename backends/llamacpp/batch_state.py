"""What the llama.cpp scheduler (``backends.llamacpp.batch``) keeps per request, per answer and per slot."""

from __future__ import annotations

import codecs
import queue
import threading
from dataclasses import dataclass, field

from app.errors import HearthError
from backends.base import AdapterUse, CancelToken, ChatEvent, GenerationParams
from backends.llamacpp.prompt_lookup import PromptLookup
from backends.llamacpp.prompt_spans import Span
from backends.llamacpp.sampling import SamplerChain
from backends.stops import StopScanner

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
