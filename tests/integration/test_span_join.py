"""Spans of a sequence's cache saved alone and joined into another sequence, on the
real llama.cpp with the embedded model: joined where they were computed, the next token's scores are those of
reading them; moved elsewhere, llama.cpp turns their keys for the new positions and the answer is the one read
there; a state llama.cpp refuses, or a span that would not follow the sequence, changes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from backends.base import LoadOptions
from backends.llamacpp.caches.kept_state import MARK, pack, unpack
from backends.llamacpp.native import NativeModel, TokenBatch
from models.gguf import ModelInfo

pytestmark = pytest.mark.integration

SYSTEM = "<|im_start|>system\nAnswer from the passages.<|im_end|>\n<|im_start|>user\n"
TOWER = (
    "The Eiffel Tower was finished in 1889 for the World's Fair in Paris. It is 330 metres tall and was the "
    "tallest man-made structure for 41 years."
)
MOUNTAIN = (
    "Mount Everest is 8,849 metres high. Tenzing Norgay and Edmund Hillary first reached its summit on 29 May 1953."
)
QUESTION = "\nWhen was the Eiffel Tower finished?<|im_end|>\n<|im_start|>assistant\n"


class Reader:
    """The model's context, read a piece at a time into sequence 0."""

    def __init__(self, model: NativeModel, sequence: int = 0) -> None:
        self.model = model
        self.batch = TokenBatch(512)
        self.sequence = sequence

    def tokens(self, text: str, first: bool = False) -> list[int]:
        return self.model.tokenize(text, first, True)

    def read(self, tokens: list[int], start: int) -> np.ndarray:
        """The pieces' tokens at positions from ``start``; the scores for the token after the last."""
        import llama_cpp

        self.batch.clear()
        for offset, token in enumerate(tokens):
            self.batch.add(token, start + offset, self.sequence, offset == len(tokens) - 1)
        assert self.model.decode(self.batch) == 0
        scores = llama_cpp.llama_get_logits_ith(self.model.ctx, self.batch.size - 1)
        return np.ctypeslib.as_array(scores, shape=(self.model.vocab_size,)).copy()

    def greedy(self, scores: np.ndarray, position: int, count: int = 12) -> list[int]:
        written = [int(np.argmax(scores))]
        for _ in range(count - 1):
            written.append(int(np.argmax(self.read([written[-1]], position))))
            position += 1
        return written

    def last_position(self) -> int:
        import llama_cpp

        return int(llama_cpp.llama_memory_seq_pos_max(self.model.memory, self.sequence))


def divergence(expected: np.ndarray, got: np.ndarray) -> float:
    """Kullback-Leibler divergence of the next-token distribution ``got`` from ``expected`` (both raw scores)."""
    p = np.exp(expected - expected.max())
    p /= p.sum()
    log_p = np.log(p + 1e-30)
    log_q = got - got.max() - np.log(np.exp(got - got.max()).sum())
    return float(np.sum(p * (log_p - log_q)))


def top(scores: np.ndarray, count: int) -> list[int]:
    return [int(i) for i in np.argsort(scores)[::-1][:count]]


def two_passages(reader: Reader) -> tuple[list[list[int]], list[int]]:
    """A documents prompt in pieces: the instructions and the first passage's label, the tower passage, the second
    label, the mountain passage, the question; and where each piece starts."""
    pieces = [
        reader.tokens(SYSTEM + "[1] tower.txt\n", first=True),
        reader.tokens(TOWER),
        reader.tokens("\n[2] everest.txt\n"),
        reader.tokens(MOUNTAIN),
        reader.tokens(QUESTION),
    ]
    return pieces, [sum(len(p) for p in pieces[:i]) for i in range(len(pieces))]


@pytest.fixture(scope="module")
def reader(model_info: ModelInfo) -> Iterator[Reader]:
    model = NativeModel(model_info.path, LoadOptions(context_length=1024, threads=2))
    try:
        yield Reader(model)
    finally:
        model.close()


def joined_where_read_scores_as_read(model: NativeModel, reading: Reader, joining: Reader) -> None:
    """The two-passage prompt read in pieces by ``reading``, its passages' spans saved; then, in ``joining``'s
    sequence, the spans joined where they were read: the question's scores are bit for bit those of reading, and so
    is the greedy answer."""
    pieces, starts = two_passages(reading)
    model.forget(reading.sequence)
    for piece, start in zip(pieces[:-1], starts[:-1], strict=True):
        reading.read(piece, start)
    tower = model.span_state(reading.sequence, starts[1], starts[2])
    mountain = model.span_state(reading.sequence, starts[3], starts[4])
    read = reading.read(pieces[-1], starts[-1])
    read_answer = reading.greedy(read, starts[-1] + len(pieces[-1]))

    model.forget(joining.sequence)
    joining.read(pieces[0], 0)
    assert model.join_span(joining.sequence, tower, computed_at=starts[1], place_at=starts[1])
    joining.read(pieces[2], starts[2])
    assert model.join_span(joining.sequence, mountain, computed_at=starts[3], place_at=starts[3])
    assert joining.last_position() == starts[4] - 1
    joined = joining.read(pieces[-1], starts[-1])
    assert np.array_equal(joined, read)
    assert joining.greedy(joined, starts[-1] + len(pieces[-1])) == read_answer


def test_spans_joined_where_they_were_read_give_the_scores_of_reading_them(reader: Reader) -> None:
    assert reader.model.can_join and reader.model.shape.slots == 1
    joined_where_read_scores_as_read(reader.model, reader, reader)


def test_a_span_joined_past_its_first_tokens_read_again_gives_the_scores_of_reading_it(reader: Reader) -> None:
    # What recomputing a share of a passage does (``GenerationParams.passage_recompute``): its first tokens are
    # read again after the text now before them, and its kept cache is joined from there on, without them.
    model = reader.model
    pieces, starts = two_passages(reader)
    skip = 5
    model.forget(0)  # read in the same pieces as below (a token's scores may change with what shares its batch)
    reader.read(pieces[0] + pieces[1][:skip], 0)
    reader.read(pieces[1][skip:], starts[1] + skip)
    reader.read(pieces[2] + pieces[3][:skip], starts[2])
    reader.read(pieces[3][skip:], starts[3] + skip)
    tower = model.span_state(0, starts[1], starts[2])
    mountain = model.span_state(0, starts[3], starts[4])
    read = reader.read(pieces[-1], starts[-1])

    model.forget(0)
    reader.read(pieces[0] + pieces[1][:skip], 0)
    with pytest.raises(ValueError, match="must follow"):
        model.join_span(0, tower, computed_at=starts[1], place_at=starts[1])  # its first tokens are there already
    assert model.join_span(0, tower, computed_at=starts[1], place_at=starts[1], skip=skip)
    assert reader.last_position() == starts[2] - 1
    reader.read(pieces[2] + pieces[3][:skip], starts[2])
    assert model.join_span(0, mountain, computed_at=starts[3], place_at=starts[3], skip=skip)
    assert reader.last_position() == starts[4] - 1
    assert np.array_equal(reader.read(pieces[-1], starts[-1]), read)


def test_a_span_moved_to_other_positions_answers_as_if_read_there(reader: Reader) -> None:
    model = reader.model
    tower, question = reader.tokens(TOWER), reader.tokens(QUESTION)
    moved_to = 300
    model.forget(0)
    reader.read(tower, 0)  # read from position 0, with nothing before it
    state = model.span_state(0, 0, len(tower))

    model.forget(0)
    reader.read(tower, moved_to)  # the same text read where it will be moved
    read = reader.read(question, moved_to + len(tower))
    read_answer = reader.greedy(read, moved_to + len(tower) + len(question))

    model.forget(0)
    assert model.join_span(0, state, computed_at=0, place_at=moved_to)
    assert reader.last_position() == moved_to + len(tower) - 1
    joined = reader.read(question, moved_to + len(tower))  # llama.cpp turns the keys before this is read
    assert int(np.argmax(joined)) == int(np.argmax(read))
    assert reader.greedy(joined, moved_to + len(tower) + len(question)) == read_answer
    # Not bit for bit: the keys were turned from their stored values instead of computed at the new positions, and
    # every layer after the first reads them (measured here: 0.006 nats, the same five likeliest tokens but the last).
    assert divergence(read, joined) < 0.02
    assert top(joined, 4) == top(read, 4)

    model.forget(0)
    assert model.join_span(0, state, computed_at=0, place_at=0)  # not moved: the scores are those first read
    unmoved = reader.read(question, len(tower))
    model.forget(0)
    reader.read(tower, 0)
    assert np.array_equal(unmoved, reader.read(question, len(tower)))


def test_a_span_kept_at_8_bits_answers_as_the_span_kept_as_computed(reader: Reader) -> None:
    # What the passage store holds by default (``kept_state``): llama.cpp's own state, its f16 rows at 8 bits.
    model = reader.model
    pieces, starts = two_passages(reader)
    model.forget(0)
    for piece, start in zip(pieces[:-1], starts[:-1], strict=True):
        reader.read(piece, start)
    tower, mountain = model.span_state(0, starts[1], starts[2]), model.span_state(0, starts[3], starts[4])
    read = reader.read(pieces[-1], starts[-1])
    read_answer = reader.greedy(read, starts[-1] + len(pieces[-1]))
    packed = [pack(tower), pack(mountain)]
    assert all(p.startswith(MARK) and len(p) < 0.56 * len(s) for p, s in zip(packed, [tower, mountain], strict=True))
    loaded = [unpack(p) for p in packed]
    assert loaded[0] is not None and loaded[1] is not None and loaded[0] != tower

    model.forget(0)
    reader.read(pieces[0], 0)
    assert model.join_span(0, loaded[0], computed_at=starts[1], place_at=starts[1])
    reader.read(pieces[2], starts[2])
    assert model.join_span(0, loaded[1], computed_at=starts[3], place_at=starts[3])
    joined = reader.read(pieces[-1], starts[-1])
    assert reader.greedy(joined, starts[-1] + len(pieces[-1])) == read_answer
    # Not bit for bit: every key and value is within half a step of its block's scale (measured here: 0.004 nats).
    assert 0 < divergence(read, joined) < 0.02
    assert top(joined, 4) == top(read, 4)


def test_a_refused_state_or_a_span_that_would_not_follow_changes_nothing(reader: Reader) -> None:
    model = reader.model
    tower = reader.tokens(TOWER)
    model.forget(0)
    reader.read(tower, 0)
    state = model.span_state(0, 0, 10)
    assert not model.join_span(0, b"not a state", computed_at=0, place_at=len(tower))
    with pytest.raises(ValueError, match="must follow"):
        model.join_span(0, state, computed_at=0, place_at=len(tower) + 5)
    assert reader.last_position() == len(tower) - 1
    assert model.join_span(0, state, computed_at=0, place_at=len(tower))
    assert reader.last_position() == len(tower) + 9


def test_with_several_slots_spans_travel_as_bytes_between_the_slots_streams(model_info: ModelInfo) -> None:
    # Each slot has a KV stream of its own: a span is cut out of one slot's state and joined into another's
    # (``stream_join``), where it was read it gives the very scores of reading, moved the answer read there.
    model = NativeModel(model_info.path, LoadOptions(context_length=1024, threads=2, slots=2))
    try:
        assert model.can_join and model.streams == 2 and not model.turns_later
        first, second = Reader(model, sequence=1), Reader(model, sequence=0)
        joined_where_read_scores_as_read(model, first, second)

        # Moved: a span read with nothing before it, joined into the other slot 300 positions on, answers as the
        # same text read there (the nudge's one token made llama.cpp turn its keys; the token is gone again).
        tower, question = first.tokens(TOWER), first.tokens(QUESTION)
        moved_to = 300
        model.forget(1)
        first.read(tower, 0)
        state = model.span_state(1, 0, len(tower))
        model.forget(1)
        first.read(tower, moved_to)  # the same text read at the new place: the reference
        read = first.read(question, moved_to + len(tower))
        model.forget(0)
        assert model.join_span(0, state, computed_at=0, place_at=moved_to)
        assert second.last_position() == moved_to + len(tower) - 1
        joined = second.read(question, moved_to + len(tower))
        assert int(np.argmax(joined)) == int(np.argmax(read))
        assert divergence(read, joined) < 0.02 and top(joined, 4) == top(read, 4)
        after = moved_to + len(tower) + len(question)
        assert second.greedy(joined, after) == first.greedy(read, after)

        # Refused: the slot keeps what it held.
        held = second.last_position()
        assert not model.join_span(0, b"not a state", computed_at=0, place_at=held + 1)
        assert second.last_position() == held
    finally:
        model.close()
