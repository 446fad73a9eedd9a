"""A sequence's state as llama.cpp writes it (``llama_state_seq_get_data``), laid out cell by cell, so that a span of
its cells can be cut out and two states joined into one without llama.cpp (pure bytes, no llama.cpp here).

The layout, as llama.cpp 0.3.x's llama-context.cpp and llama-kv-cache.cpp write it: a mark (``io_magic``) and the
sequence's id; the count of KV streams; for each stream, its count of cells, then, for the one stream that holds the
sequence's cells, each cell's position, its count of sequence ids (one) and the id; whether values are transposed
(never with flash attention, which Hearth always uses) and the count of layers; then every layer's key rows (their
type, the bytes of a row, a row per cell) and every layer's value rows alike. A state laid out in any other way (cells
with more to them, as M-RoPE models write; transposed values; several streams with cells) is not laid out here:
:func:`layout` returns None and the caller reads the tokens instead.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MARK = 0xAF143CD8  # what llama.cpp's sequence states begin with
_HEAD = struct.Struct("<IiI")  # the mark, the sequence's id, the count of streams
_U32 = struct.Struct("<I")
_CELL = struct.Struct("<iIi")  # a cell's position, its count of sequence ids (one), the id
_ROWS_HEAD = struct.Struct("<iQ")  # a layer's rows: their type, then the bytes of one row
_MOST = 4096  # more streams or layers than this is not a state


@dataclass(frozen=True)
class Rows:
    """One layer's key or value rows: a row per cell, ``row_bytes`` each, at ``start``-``stop`` of the state."""

    kind: int  # ggml's type number (1: f16)
    row_bytes: int
    start: int
    stop: int


@dataclass(frozen=True)
class StateLayout:
    state: bytes
    streams: int
    sequence: int  # the sequence's id the state was written from
    positions: tuple[int, ...]  # each cell's, in the order the cells are written
    rows: tuple[Rows, ...]  # every layer's key rows, then every layer's value rows


def layout(state: bytes) -> StateLayout | None:
    """Where everything lies in ``state``; None when it is not laid out as this module knows, to the last byte."""
    try:
        mark, sequence, streams = _HEAD.unpack_from(state, 0)
        if mark != MARK or not 0 < streams <= _MOST:
            return None
        at, found = _HEAD.size, False
        positions: tuple[int, ...] | None = ()
        rows: tuple[Rows, ...] | None = ()
        for _ in range(streams):
            (cells,) = _U32.unpack_from(state, at)
            at += _U32.size
            if cells == 0:
                continue
            if found:
                return None  # cells in two streams: a whole context's state, not a sequence's
            found = True
            positions, at = _cells(state, at, cells)
            if positions is None:
                return None
            rows, at = _rows(state, at, cells)
            if rows is None:
                return None
        if positions is None or rows is None or at != len(state):
            return None
        return StateLayout(state, streams, sequence, positions, rows)
    except struct.error:
        return None


def _cells(state: bytes, at: int, cells: int) -> tuple[tuple[int, ...] | None, int]:
    positions = []
    for _ in range(cells):
        position, count, _sequence = _CELL.unpack_from(state, at)
        if count != 1:
            return None, at
        positions.append(position)
        at += _CELL.size
    return tuple(positions), at


def _rows(state: bytes, at: int, cells: int) -> tuple[tuple[Rows, ...] | None, int]:
    transposed, layers = struct.unpack_from("<II", state, at)
    at += 8
    if transposed != 0 or not 0 < layers <= _MOST:
        return None, at
    rows = []
    for _ in range(2 * layers):  # every layer's keys, then every layer's values
        kind, row_bytes = _ROWS_HEAD.unpack_from(state, at)
        at += _ROWS_HEAD.size
        stop = at + cells * row_bytes
        if stop > len(state):
            return None, at
        rows.append(Rows(kind, row_bytes, at, stop))
        at = stop
    return tuple(rows), at


def _encode(
    streams: int, sequence: int, positions: Sequence[int], shape: Sequence[Rows], blocks: Sequence[bytes]
) -> bytes:
    """A state of cells at ``positions`` whose rows for each part of ``shape`` are ``blocks`` (a row per cell, in
    the cells' order), for a context of ``streams`` streams: the cells are written in the first stream (llama.cpp
    loads them into the stream of the sequence they are loaded into, whichever stream they were written in)."""
    head = _HEAD.pack(MARK, sequence, streams)
    if not positions:
        return head + _U32.pack(0) * streams
    parts = [head, _U32.pack(len(positions))]
    parts += [_CELL.pack(position, 1, sequence) for position in positions]
    parts.append(struct.pack("<II", 0, len(shape) // 2))
    for part, block in zip(shape, blocks, strict=True):
        parts += [_ROWS_HEAD.pack(part.kind, part.row_bytes), block]
    parts += [_U32.pack(0)] * (streams - 1)
    return b"".join(parts)


def sliced(state: bytes, keep: Callable[[int], bool], streams: int | None = None) -> bytes | None:
    """``state`` with only the cells whose position ``keep`` holds, in their order (for a context of ``streams``
    streams: the state's own count unless given); None when the state is not laid out as this module knows."""
    found = layout(state)
    if found is None:
        return None
    chosen = [n for n, position in enumerate(found.positions) if keep(position)]
    runs = _runs(chosen)  # a span's cells lie together: a slice of each part's rows, not a row at a time
    blocks = [
        b"".join(
            found.state[part.start + first * part.row_bytes : part.start + stop * part.row_bytes]
            for first, stop in runs
        )
        for part in found.rows
    ]
    positions = [found.positions[n] for n in chosen]
    return _encode(streams or found.streams, found.sequence, positions, found.rows, blocks)


def _runs(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Ascending ``indices`` as runs of consecutive ones: (first, stop) each."""
    runs: list[tuple[int, int]] = []
    for index in indices:
        if runs and runs[-1][1] == index:
            runs[-1] = (runs[-1][0], index + 1)
        else:
            runs.append((index, index + 1))
    return runs


def joined(first: bytes, then: bytes, streams: int | None = None) -> bytes | None:
    """One state of ``first``'s cells then ``then``'s, in that order (for ``streams`` streams: ``first``'s count
    unless given); None when either is not laid out as this module knows, or their layers differ (another model
    or cache type)."""
    a, b = layout(first), layout(then)
    if a is None or b is None:
        return None
    count = streams or a.streams
    if not b.positions:
        return sliced(first, lambda _position: True, count)
    if not a.positions:
        return sliced(then, lambda _position: True, count)
    if len(a.rows) != len(b.rows) or any(
        x.kind != y.kind or x.row_bytes != y.row_bytes for x, y in zip(a.rows, b.rows, strict=True)
    ):
        return None
    blocks = [a.state[x.start : x.stop] + b.state[y.start : y.stop] for x, y in zip(a.rows, b.rows, strict=True)]
    return _encode(count, a.sequence, a.positions + b.positions, a.rows, blocks)


def for_streams(state: bytes, streams: int) -> bytes:
    """``state`` for a context of ``streams`` KV streams (one written by a context with another count of slots, which
    llama.cpp refuses as it is); as it is when it already fits, or when it is not laid out as this module knows."""
    try:
        mark, _sequence, count = _HEAD.unpack_from(state, 0)
    except struct.error:
        return state
    if mark != MARK or count == streams:
        return state
    return sliced(state, lambda _position: True, streams) or state
