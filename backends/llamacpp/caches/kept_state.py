"""Kept passage caches at 8 bits, where that keeps the answers' accuracy.

llama.cpp writes a sequence's state as its cells' positions, then each layer's key rows and value rows in the
context's cache type (f16 unless the user chose a quantized one; ``state_cells`` lays it out).
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

import numpy as np

from backends.llamacpp.caches.state_cells import Rows, layout

MARK = b"HKQ8"  # the packed form begins with it (llama.cpp's states with another)
_F16 = 1  # ggml's type numbers
BLOCK = 32  # values a scale covers
_U32 = struct.Struct("<I")
_PIECE = struct.Struct("<BQ")  # a packed piece: kind (0 as written, 1 f16 rows at 8 bits), then its length


def _f16_rows(state: bytes) -> list[Rows] | None:
    """The f16 key and value rows of a state llama.cpp wrote, in the order they lie; None when its layout is not the
    one ``state_cells`` knows."""
    found = layout(state)
    if found is None:
        return None
    return [rows for rows in found.rows if rows.kind == _F16 and rows.row_bytes % (2 * BLOCK) == 0]


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
