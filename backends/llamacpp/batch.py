"""Continuous batching: one thread owns the llama.cpp context and writes every slot's answer together.

Requests wait in arrival order. Between two steps each free slot takes the next request (the free slot whose
sequence already holds the longest part of its prompt, see ``backends.llamacpp.batch_policy``). A step evaluates one
token for every slot writing an answer, all in one ``llama_decode``, then the next piece of each prompt still
being read, within a per-step token budget (a long prompt is read in chunks, so it delays the others' next
token by one chunk, not by the whole prompt). Each slot with logits samples with its own chain, turns the token
into text, and puts events on its request's queue. A request that was cancelled, or whose reader went away,
leaves at the next step; the others never notice. Busy slots are kept side by side (an answer is moved, its
cache copied, when a slot between busy ones frees up), because llama.cpp evaluates sequences in one pass only
when their ids follow each other.

Stop reaches a prompt being read within one graph node: a prompt piece is evaluated in a call of its own, and
that call carries llama.cpp's abort callback, which asks whether its request is still wanted. Calls that write
answer tokens carry none: they hold every writing slot's token, and each takes only milliseconds. A Stop is
no failure: the aborted piece is dropped from the cache (what was read before it stays, for reuse) and the
answer ends as cancelled, without an error in the log.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from backends.base import (
    AdapterUse,
    CancelToken,
    Finished,
    FinishReason,
    GenerationParams,
    Reading,
    TextDelta,
)
from backends.llamacpp.batch_policy import (
    ANY_ADAPTER,
    FreeSlot,
    admissible,
    choose_slot,
    gap_moves,
    prefill_shares,
    prefix_donor,
)
from backends.llamacpp.batch_state import Answer, Outcome, Request, Slot, lone_prompt_piece, open_answer, usage_of
from backends.llamacpp.caches.passage_join import PassageJoiner
from backends.llamacpp.caches.passage_store import PassageStore
from backends.llamacpp.caches.slot_keeper import SlotKeeper
from backends.llamacpp.native import ABORTED
from backends.llamacpp.prompt_lookup import DraftPolicy
from models.shared.errors import GenerationError, HearthError, ModelNotReady

if TYPE_CHECKING:
    from backends.llamacpp.caches.prompt_spans import Span
    from backends.llamacpp.caches.saved_slots import SavedSlots
    from backends.llamacpp.native import NativeModel, TokenBatch

log = logging.getLogger(__name__)

# While other answers are being written, a prompt is read this many tokens per step, so each step delays their
# next token by one chunk's evaluation (about 0.6 s here) rather than by the whole prompt's. Measured on the
# embedded model, 2 threads: 128-token pieces read a prompt at 0.85-1.0x the speed of 512-token ones.
PREFILL_CHUNK_TOKENS = 128
_POLL_S = 0.5  # how often a reader checks that the scheduler is still alive while it waits


class BatchScheduler:
    """Serves requests on ``engine``'s slots from one thread; ``close()`` ends whatever is left as cancelled."""

    def __init__(
        self,
        engine: NativeModel,
        batch: TokenBatch,
        seeds: random.Random,
        saved: SavedSlots | None = None,
        passages: PassageStore | None = None,
    ) -> None:
        self._engine = engine
        self._keeper = SlotKeeper(engine, saved)  # conversation caches on disk
        self._batch = batch
        self._seeds = seeds
        self._slots = [Slot(index) for index in range(engine.shape.slots)]
        self._waiting: deque[Request] = deque()
        self._wake = threading.Condition()
        self._closing = False
        self._steps = 0
        self._arrivals = 0
        self._adapter: AdapterUse | None = None  # the adapter every slot answers with now
        self._drafts = DraftPolicy()  # how many guessed tokens pay on this machine, learnt as it answers
        self._threads: int | None = None  # threads asked for, applied before the next step
        self._to_forget: set[str] = set()  # asked for, applied before the next step
        # Slots whose keys and values llama.cpp completes at the next llama_decode: a copy from another slot
        # (``NativeModel.copy_sequence``), or a joined passage whose keys are still to be turned for their new places
        # (``join_span``). Until one has run no request is admitted, so no cache is loaded or saved unfinished.
        self._copying: list[Slot] = []
        self._joiner = PassageJoiner(engine, passages)  # kept passage caches, in memory and on disk
        self._thread = threading.Thread(target=self._run, name="llama.cpp batch", daemon=True)
        self._thread.start()

    # --- any thread ----------------------------------------------------------------------------------------
    def submit(
        self,
        prompt: list[int],
        params: GenerationParams,
        cancel: CancelToken,
        started: float,
        spans: Sequence[Span] = (),
    ) -> Request:
        """Queue an answer to ``prompt``; ``spans`` say where its passages lie (their caches are kept and joined)."""
        request = Request(prompt, params, cancel, started, spans=tuple(spans))
        with self._wake:
            if self._closing or not self._thread.is_alive():
                raise ModelNotReady("The model was closed.", "Load a model, then send the message again.")
            self._waiting.append(request)
            self._wake.notify()
        return request

    def set_threads(self, threads: int) -> None:
        """Compute with ``threads`` threads from the next step on (applied between two llama_decode calls)."""
        with self._wake:
            self._threads = threads

    def forget_owner(self, owner: str) -> None:
        """Drop the deleted conversation ``owner``'s caches (idle slots next step; one answering it is never saved)."""
        with self._wake:
            self._to_forget.add(owner)
            self._wake.notify()

    def next_event(self, request: Request) -> Outcome:
        """Wait for the request's next event; an error if the scheduler died without ending it."""
        while True:
            try:
                return request.events.get(timeout=_POLL_S)
            except queue.Empty:
                if not self._thread.is_alive() and request.events.empty():
                    return GenerationError(
                        "llama.cpp stopped answering.", "Reload the model; if it keeps happening, restart Hearth."
                    )

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()

    # --- the scheduler thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        clean = False
        try:
            while self._admit_waiting():
                self._apply_threads()
                self._retire_unwanted()
                self._close_gaps()
                self._step()
            clean = True
        except Exception:  # a bug here must not leave readers waiting forever
            log.exception("the llama.cpp scheduler stopped")
            failure = GenerationError("llama.cpp stopped in the middle of the answer.", "Reload the model.")
            for slot in self._slots:
                if slot.answer is not None:
                    slot.answer.request.events.put(failure)
                    self._release(slot)
        finally:
            with self._wake:
                self._closing = True
                left = list(self._waiting)
                self._waiting.clear()
            for request in left:
                self._end(request, "cancelled")
            for slot in self._slots:
                if slot.answer is not None:
                    self._finish(slot, "cancelled")
            if clean:  # closed as asked: what the slots hold is kept for the next start
                for slot in self._slots:
                    if slot not in self._copying:  # its keys and values are still to be completed
                        self._keeper.save(slot, kept=0)

    def _apply_forgetting(self) -> None:
        with self._wake:
            owners, self._to_forget = self._to_forget, set()
        if owners:
            self._keeper.forget(owners, (slot for slot in self._slots if slot.answer is None))

    def _apply_threads(self) -> None:
        with self._wake:
            threads, self._threads = self._threads, None
        if threads is not None:
            self._engine.set_threads(threads)
            self._drafts = DraftPolicy()  # what a step costs was measured with the other count

    def _admit_waiting(self) -> bool:
        """Wait until there is work, then give free slots to waiting requests in arrival order. False: closing."""
        with self._wake:
            while not self._closing and not self._waiting and not self._busy() and not self._to_forget:
                self._wake.wait()
            if self._closing:
                return False
            gone = [request for request in self._waiting if request.unwanted()]
            for request in gone:
                self._waiting.remove(request)
            self._settle_copies()
            admitted = [] if self._copying else self._admissible()
        self._apply_forgetting()  # before a slot of a deleted conversation can be taken (and saved)
        for request in gone:
            self._end(request, "cancelled")
        if admitted and admitted[0].params.adapter != self._adapter:
            try:
                self._engine.use_adapter(admitted[0].params.adapter)
            except HearthError as exc:
                for request in admitted:
                    request.events.put(exc)
                return True
            self._adapter = admitted[0].params.adapter
        for number, request in enumerate(admitted):
            self._start(request)
            if self._copying:  # the others wait for the copy (one step)
                with self._wake:
                    self._waiting.extendleft(reversed(admitted[number + 1 :]))
                break
        return True

    def _settle_copies(self) -> None:
        """Copies or turns still to happen and no answer left to run the llama_decode that makes them (they were
        cancelled): those slots are emptied, so a copy lands in cells no sequence names."""
        if self._copying and not self._busy():
            for slot in self._copying:
                self._engine.forget(slot.index)
                slot.cached.clear()
            self._copying.clear()

    def _admissible(self) -> list[Request]:
        """Waiting requests that may take free slots now, in arrival order (``batch_policy.admissible``)."""
        free = sum(1 for slot in self._slots if slot.answer is None)
        current = self._adapter if self._busy() else ANY_ADAPTER
        count = admissible([request.params.adapter for request in self._waiting], free, current)
        return [self._waiting.popleft() for _ in range(count)]

    def _busy(self) -> bool:
        return any(slot.answer is not None for slot in self._slots)

    def _start(self, request: Request) -> None:
        adapter = request.params.adapter
        # A cache computed under another adapter is worth nothing to this answer.
        free = [
            FreeSlot(s.index, s.cached if s.adapter == adapter else [], s.last_used)
            for s in self._slots
            if s.answer is None
        ]
        choice = choose_slot(free, request.prompt)
        slot = self._slots[choice.index]
        reused = choice.reused
        if slot.adapter != adapter:
            self._keeper.save(slot, kept=0)
            self._engine.forget(slot.index)
            slot.cached.clear()
            slot.adapter = adapter
        reused = self._keeper.restore(slot, request.prompt, reused)
        others = [free_slot for free_slot in free if free_slot.index != slot.index]
        reused = self._copy_prefix(slot, request.prompt, reused, others)
        reused = self._joiner.cut_before_kept(request, slot.adapter, reused)
        if len(slot.cached) > reused:
            self._keeper.save(slot, kept=reused)
            self._engine.forget(slot.index, reused)
            del slot.cached[reused:]
        slot.owner = request.params.cache_owner
        self._arrivals += 1
        slot.answer = open_answer(request, self._engine, self._seeds.getrandbits(32), self._arrivals, reused)

    def _copy_prefix(self, slot: Slot, prompt: list[int], reused: int, others: list[FreeSlot]) -> int:
        """When another free slot (``others``, as ``_start`` saw them) holds more of the prompt's beginning than
        ``slot`` does (the system prompt and instructions every new conversation starts with), it is copied into
        ``slot``, whose own cache is saved first; how many prompt tokens the slot then holds. Only free slots give:
        from a busy one the copy would depend on when this request arrived (in a test of two answers at once, a
        greedy answer drifted 40 tokens in)."""
        choice = prefix_donor(others, prompt, reused)
        if choice is None:
            return reused
        self._keeper.save(slot, kept=reused)
        self._engine.copy_sequence(choice.index, slot.index, stop=choice.reused)
        slot.cached[:] = prompt[: choice.reused]
        self._copying.append(slot)
        return choice.reused

    def _retire_unwanted(self) -> None:
        for slot in self._slots:
            if slot.answer is not None and slot.answer.request.unwanted():
                self._finish(slot, "cancelled")

    def _close_gaps(self) -> None:
        """Move answers so the busy slots sit side by side. The target's own cache is dropped; the source keeps
        a copy of the moved tokens, still good for reuse."""
        for source, target in gap_moves(slot.index for slot in self._slots if slot.answer is not None):
            self._engine.copy_sequence(source, target)
            moved, into = self._slots[source], self._slots[target]
            self._copying.append(into)
            into.cached = list(moved.cached)
            into.adapter, into.owner = moved.adapter, moved.owner
            into.answer, moved.answer = moved.answer, None

    def _step(self) -> None:
        """One token for every slot writing an answer, then the next piece of each prompt being read."""
        active = [(slot, slot.answer) for slot in self._slots if slot.answer is not None]
        writing = [(slot, [answer.next_token]) for slot, answer in active if answer.next_token is not None]
        reading = sorted(((slot, answer) for slot, answer in active if answer.pending), key=lambda p: p[1].admitted)
        for slot, answer in reading:
            self._join_passages(slot, answer)
        shares = prefill_shares(
            [self._joiner.readable(slot, answer) for slot, answer in reading],
            len(writing),
            self._batch.capacity,
            PREFILL_CHUNK_TOKENS,
        )
        self._steps += 1
        draft = self._draft(writing)
        if draft:
            self._evaluate_draft(writing[0][0], draft)
        elif writing:
            self._evaluate(writing)
        for (slot, answer), share in zip(reading, shares, strict=True):
            if share:
                self._evaluate([(slot, answer.pending[:share])])
                self._join_passages(slot, answer)

    def _join_passages(self, slot: Slot, answer: Answer) -> None:
        if slot in self._copying and not self._engine.turns_later:  # a stream per slot: its bytes after the copy
            return
        if self._joiner.advance(slot, answer) and slot not in self._copying:
            self._copying.append(slot)  # its joined keys are turned at the next llama_decode

    def _evaluate(self, pieces: list[tuple[Slot, list[int]]]) -> None:
        """One llama_decode over ``pieces`` (slot, tokens it reads), then a token sampled for every slot whose
        piece ends where its logits are wanted: every answer token, and the last token of a prompt.

        The answer tokens of all writing slots share one call, in ascending sequence order (llama.cpp evaluates
        sequences together only when their ids follow each other). A prompt piece gets a call of its own: with
        a cache per sequence llama.cpp cuts a batch into equal-length runs per sequence, so a piece mixed with
        answer tokens would be read one token at a time at first (see ``backends.llamacpp.batch_policy``)."""
        batch = self._batch
        batch.clear()
        rows: list[int | None] = []
        for slot, tokens in pieces:
            answer = slot.answer
            assert answer is not None
            wants_logits = answer.next_token is not None or len(tokens) == len(answer.pending)
            row = None
            for offset, token in enumerate(tokens):
                last = offset == len(tokens) - 1
                row = batch.add(token, len(slot.cached) + offset, slot.index, logits=wants_logits and last)
            rows.append(row if wants_logits else None)
        reader = lone_prompt_piece(pieces)
        began = time.perf_counter()
        status = self._engine.decode(batch, stop_when=None if reader is None else reader.request.unwanted)
        if status == 0:
            self._copying.clear()  # llama.cpp made them before evaluating the batch
        if reader is None and len(pieces) == 1 and status == 0:  # one answer's next token: a plain step's time
            self._drafts.observe_step(1, time.perf_counter() - began)
        if status == ABORTED and reader is not None and reader.request.unwanted():
            self._stopped_while_reading(pieces[0][0])
            return
        if status != 0:
            self._decode_failed([slot for slot, _ in pieces], status)
            return
        for (slot, tokens), row in zip(pieces, rows, strict=True):
            answer = slot.answer
            assert answer is not None
            slot.cached.extend(tokens)
            if answer.next_token is not None:
                answer.next_token = None
            else:
                del answer.pending[: len(tokens)]
                if answer.pending and answer.request.params.report_reading:  # more of it to read: say how far
                    total = len(answer.request.prompt)
                    answer.request.events.put(Reading(total - len(answer.pending), total))
            if row is not None:
                self._take(slot, answer, answer.sampler.sample(self._engine.ctx, row))

    def _draft(self, writing: list[tuple[Slot, list[int]]]) -> list[int]:
        """The guessed tokens to evaluate after the one answer being written, within its budget and the batch;
        none when several answers are written (their tokens already share each step's reading of the weights)."""
        if len(writing) != 1:
            return []
        answer = writing[0][0].answer
        if answer is None or answer.lookup is None:
            return []
        room = min(answer.budget - answer.produced - 1, self._batch.capacity - 1)
        candidate = answer.lookup.draft(room)
        return candidate[: self._drafts.length(len(candidate))] if candidate else []

    def _evaluate_draft(self, slot: Slot, draft: list[int]) -> None:
        """The answer's next token and the guesses after it in one llama_decode, with logits at each position.
        Each position's token is drawn through the answer's own sampler chain; a guess is kept while it equals the
        draw (at temperature 0: the greedy choice; with sampling, the speculative rule for a single guessed token,
        see ``backends.llamacpp.prompt_lookup``). The first draw that differs is the next token, and the cache drops the
        guesses from there on."""
        answer = slot.answer
        assert answer is not None and answer.next_token is not None and answer.lookup is not None
        lookup = answer.lookup
        batch = self._batch
        batch.clear()
        start = len(slot.cached)
        tokens = [answer.next_token, *draft]
        rows = [batch.add(token, start + offset, slot.index, logits=True) for offset, token in enumerate(tokens)]
        began = time.perf_counter()
        status = self._engine.decode(batch)
        if status == 0:
            self._copying.clear()
        self._drafts.observe_step(len(tokens), time.perf_counter() - began)
        if status != 0:
            self._decode_failed([slot], status)
            return
        slot.cached.extend(tokens)
        answer.next_token = None
        kept = 0
        for offset, row in enumerate(rows):
            token = answer.sampler.sample(self._engine.ctx, row)
            guessed = offset < len(draft) and token == draft[offset]
            kept += guessed
            self._take(slot, answer, token)
            if not guessed or slot.answer is None:
                break
        evaluated = start + 1 + kept  # the next token and the kept guesses: the rest were wrong
        if len(slot.cached) > evaluated:
            self._engine.forget(slot.index, evaluated)
            del slot.cached[evaluated:]
        lookup.record(len(draft), kept)
        self._drafts.observe_draft(len(draft), kept)

    def _take(self, slot: Slot, answer: Answer, token: int) -> None:
        if answer.lookup is not None:
            answer.lookup.append(token)
        if answer.first_token_at is None:
            answer.first_token_at = time.perf_counter()
        if self._engine.is_end_of_generation(token):
            self._finish(slot, "stop")
            return
        answer.produced += 1
        text = answer.scanner.feed(answer.decoder.decode(self._engine.piece(token)))
        if text:
            answer.request.events.put(TextDelta(text))
        if answer.scanner.stopped:
            self._finish(slot, "stop")
        elif answer.request.unwanted():
            self._finish(slot, "cancelled")
        elif answer.produced >= answer.budget:
            self._finish(slot, "length")
        else:
            answer.next_token = token

    def _stopped_while_reading(self, slot: Slot) -> None:
        """Cancelled while llama.cpp read a piece of its prompt: it drops what the call wrote, and what was read
        before stays cached for reuse."""
        log.debug("stopped reading the prompt in slot %d at token %d (cancelled)", slot.index, len(slot.cached))
        self._engine.forget(slot.index, len(slot.cached))
        self._finish(slot, "cancelled")

    def _decode_failed(self, slots: list[Slot], status: int) -> None:
        """llama_decode refused or failed: the affected answers end with an error and their sequences are
        cleared (llama.cpp keeps what earlier sub-batches wrote); the other slots carry on."""
        log.error("llama_decode failed with status %d for slots %s", status, [slot.index for slot in slots])
        for slot in slots:
            self._engine.forget(slot.index)
            slot.cached.clear()
            answer = slot.answer
            assert answer is not None
            if answer.request.unwanted():
                self._finish(slot, "cancelled")
                continue
            answer.request.events.put(
                GenerationError(
                    f"llama.cpp stopped in the middle of the answer (llama_decode status {status}).",
                    "Send the message again; if it keeps failing, start a new conversation or restart Hearth.",
                )
            )
            self._release(slot)

    def _finish(self, slot: Slot, reason: FinishReason) -> None:
        answer = slot.answer
        assert answer is not None
        if reason != "cancelled":  # an unfinished character, or text that turned out not to be a stop string
            tail = answer.scanner.feed(answer.decoder.decode(b"", final=True)) + answer.scanner.flush()
            if tail:
                answer.request.events.put(TextDelta(tail))
        self._end(answer.request, reason, answer)
        self._release(slot)

    def _end(self, request: Request, reason: FinishReason, answer: Answer | None = None) -> None:
        """Usage and Finished for ``request``; ``answer`` is None when it never reached a slot."""
        request.events.put(usage_of(request, answer, time.perf_counter()))
        request.events.put(Finished(reason))

    def _release(self, slot: Slot) -> None:
        if slot.answer is not None:
            slot.answer.sampler.close()
        slot.answer = None
        slot.last_used = self._steps
