"""Kept passage caches at 8 bits (issue 39, item 1: "quantized where that keeps accuracy").

llama.cpp writes a sequence's state as a mark and the sequence's id, its cells' positions and sequence ids, then
each layer's key rows and value rows in the context's cache type (f16 unless the user chose a quantized one).
:func:`pack` keeps the f16 rows as blocks of 32 values with one f16 scale and 32 signed bytes each (the layout of
ggml's q8_0, 34 bytes where f16 takes 64) and everything else as it was; :func:`unpack` gives back a state in
llama.cpp's own format, each value within half a step of its scale, for llama.cpp to load. Pure bytes and
arithmetic: no llama.cpp here.

A state this module cannot lay out exactly (transposed values, a layer without values, cells of several sequences,
a format it does not know) is kept as llama.cpp wrote it: :func:`pack` then returns it unchanged, and
:func:`unpack` tells the two apart by the packed form's leading mark.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MARK = b"HKQ8"  # the packed form begins with it (llama.cpp's states with another)
_STATE_MARK = 0xAF143CD8  # what llama.cpp's sequence states begin with (llama-context.cpp's io_magic)
_F16 = 1  # ggml's type numbers
BLOCK = 32  # values a scale covers
_U32 = struct.Struct("<I")
_ROWS_HEAD = struct.Struct("<iQ")  # a layer's rows: their type, then the bytes of one row
_PIECE = struct.Struct("<BQ")  # a packed piece: kind (0 as written, 1 f16 rows at 8 bits), then its length


@dataclass(frozen=True)
class _Rows:
    start: int  # where a layer's f16 rows begin in the state
    stop: int


def _f16_rows(state: bytes) -> list[_Rows] | None:
    """Where the f16 key and value rows lie in a state llama.cpp wrote (``llama_state_seq_get_data``); None when its
    layout is not the one this module knows, to the last byte."""
    try:
        mark, _sequence, streams = struct.unpack_from("<IiI", state, 0)
        at, rows = 12, []
        if mark != _STATE_MARK or not 0 < streams <= 4096:
            return None
        for _ in range(streams):
            (cells,) = _U32.unpack_from(state, at)
            at += _U32.size
            if cells == 0:
                continue
            for _cell in range(cells):  # position, then the count of sequence ids (one) and the id
                (count,) = _U32.unpack_from(state, at + 4)
                if count != 1:
                    return None
                at += 12
            transposed, layers = struct.unpack_from("<II", state, at)
            at += 8
            if transposed != 0 or not 0 < layers <= 4096:
                return None
            for _half in range(2):  # every layer's keys, then every layer's values
                for _layer in range(layers):
                    kind, row_bytes = _ROWS_HEAD.unpack_from(state, at)
                    at += _ROWS_HEAD.size
                    stop = at + cells * row_bytes
                    if stop > len(state):
                        return None
                    if kind == _F16 and row_bytes % (2 * BLOCK) == 0:
                        rows.append(_Rows(at, stop))
                    at = stop
        return rows if at == len(state) else None
    except struct.error:
        return None


def pack(state: bytes) -> bytes:
    """``state`` with its f16 rows at 8 bits (a little over half the size), or unchanged where it has none or is laid
    out otherwise than this module knows."""
    rows = _f16_rows(state)
    if not rows:
        return state
    pieces, at = [MARK, _U32.pack(2 * len(rows) + 1)], 0
    for part in rows:
        packed = _quantized(state[part.start : part.stop])
        if packed is None:
            return state
        pieces += [_PIECE.pack(0, part.start - at), state[at : part.start], _PIECE.pack(1, len(packed)), packed]
        at = part.stop
    pieces += [_PIECE.pack(0, len(state) - at), state[at:]]
    return b"".join(pieces)


def unpack(kept: bytes) -> bytes | None:
    """The state llama.cpp can load from what :func:`pack` returned; None when a packed form is damaged (its lengths
    do not add up)."""
    if not kept.startswith(MARK):
        return kept
    try:
        (count,) = _U32.unpack_from(kept, len(MARK))
        at, pieces = len(MARK) + _U32.size, []
        for _ in range(count):
            kind, length = _PIECE.unpack_from(kept, at)
            at += _PIECE.size
            body = kept[at : at + length]
            if len(body) != length or kind not in (0, 1):
                return None
            at += length
            if kind == 1:
                restored = _restored(body)
                if restored is None:
                    return None
                body = restored
            pieces.append(body)
    except struct.error:
        return None
    return b"".join(pieces) if at == len(kept) else None


def _quantized(rows: bytes) -> bytes | None:
    """f16 values as blocks of 32: all the blocks' f16 scales, then all their signed bytes; None when a value is not
    finite (nothing to scale it by)."""
    values = np.frombuffer(rows, dtype=np.float16).astype(np.float32).reshape(-1, BLOCK)
    if not np.isfinite(values).all():
        return None
    scales = (np.abs(values).max(axis=1) / 127.0).astype(np.float16)
    wide = scales.astype(np.float32)[:, None]
    steps = np.divide(values, wide, out=np.zeros_like(values), where=wide > 0)
    packed: bytes = scales.tobytes() + np.clip(np.rint(steps), -127, 127).astype(np.int8).tobytes()
    return packed


def _restored(packed: bytes) -> bytes | None:
    """The f16 values of :func:`_quantized`'s blocks; None when the length is not a whole number of blocks."""
    blocks, left = divmod(len(packed), 2 + BLOCK)
    if left:
        return None
    scales = np.frombuffer(packed, dtype=np.float16, count=blocks).astype(np.float32)
    steps = np.frombuffer(packed, dtype=np.int8, offset=2 * blocks).astype(np.float32).reshape(blocks, BLOCK)
    return (steps * scales[:, None]).astype(np.float16).tobytes()
