"""Kept passage caches at 8 bits (``backends.llamacpp.caches.kept_state``), on states laid out as llama.cpp writes a
sequence's: f16 rows come back within half a step of their block's scale, everything else byte for byte; a state laid
out otherwise is kept as it was; a damaged packed form is refused, never handed to llama.cpp."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from backends.llamacpp.caches.kept_state import MARK, pack, unpack
from backends.llamacpp.caches.passage_shelf import PassageShelf
from backends.llamacpp.caches.passage_store import KeptPassage, PassageStore

F16, Q8_0 = 1, 8


def state(
    cells: int = 5,
    layers: int = 3,
    width: int = 64,
    streams: int = 1,
    kind: int = F16,
    seed: int = 0,
    transposed: int = 0,
) -> bytes:
    """A sequence's state as llama.cpp writes it: its mark and the sequence's id, the stream count, each stream's
    cell count (cells in the last stream only), each cell's position and sequence id, then every layer's key rows and
    every layer's value rows."""
    rng = np.random.default_rng(seed)
    out = [struct.pack("<IiI", 0xAF143CD8, streams - 1, streams)]
    out += [struct.pack("<I", 0)] * (streams - 1)
    out.append(struct.pack("<I", cells))
    for position in range(cells):
        out.append(struct.pack("<iIi", 40 + position, 1, streams - 1))
    out.append(struct.pack("<II", transposed, layers))
    row_bytes = width * 2 if kind == F16 else width // 32 * 34
    for _ in range(2 * layers):
        out.append(struct.pack("<iQ", kind, row_bytes))
        if kind == F16:
            out.append((rng.standard_normal(cells * width) * 3).astype(np.float16).tobytes())
        else:
            out.append(rng.integers(0, 255, cells * row_bytes, dtype=np.uint8).tobytes())
    return b"".join(out)


def rows(data: bytes, cells: int, layers: int, width: int, streams: int = 1) -> list[np.ndarray]:
    """The f16 rows of :func:`state`'s layout, one array per layer and half."""
    at = 8 + 4 * streams + 4 + 12 * cells + 8
    found = []
    for _ in range(2 * layers):
        at += 12
        found.append(np.frombuffer(data, dtype=np.float16, count=cells * width, offset=at).astype(np.float32))
        at += cells * width * 2
    return found


@pytest.mark.parametrize("streams", [1, 4])
def test_f16_rows_come_back_within_half_a_step_and_the_rest_byte_for_byte(streams: int) -> None:
    original = state(cells=20, width=128, streams=streams)
    packed = pack(original)
    assert packed.startswith(MARK)
    assert len(packed) < 0.56 * len(original)
    restored = unpack(packed)
    assert restored is not None and len(restored) == len(original)
    head = 8 + 4 * streams + 4 + 12 * 20 + 8
    assert restored[:head] == original[:head]  # stream counts, positions, sequence ids, layout
    layout = (20, 3, 128, streams)
    for before, after in zip(rows(original, *layout), rows(restored, *layout), strict=True):
        blocks = before.reshape(-1, 32)
        step = np.abs(blocks).max(axis=1, keepdims=True) / 127
        assert (
            np.abs(after.reshape(-1, 32) - blocks) <= step * 0.51 + np.abs(blocks) / 1024
        ).all()  # and f16's rounding
        assert not np.array_equal(after, before)  # it is lossy: the test reads what it claims


def test_packing_twice_gives_the_same_bytes() -> None:
    original = state(seed=3)
    assert pack(original) == pack(original)
    again = unpack(pack(original))
    assert again is not None and unpack(pack(again)) == again


@pytest.mark.parametrize(
    "odd",
    [
        state(kind=Q8_0),  # the user's cache is already 8-bit: nothing to pack
        state(transposed=1),  # values transposed (no flash attention): not this layout
        state(width=48),  # rows not a whole number of 32-value blocks
        state()[:-1],  # one byte short
        state() + b"\0",  # one byte over
        b"not a state",
        b"\xd8\x3c\x14\xaf" + state()[4:][:40],  # cut short after llama.cpp's mark
        b"",
    ],
)
def test_a_state_laid_out_otherwise_is_kept_as_it_was(odd: bytes) -> None:
    assert pack(odd) == odd
    assert unpack(odd) == odd


def test_a_cell_of_several_sequences_is_kept_as_it_was() -> None:
    original = bytearray(state())
    struct.pack_into("<I", original, 8 + 8 + 4, 2)  # the first cell says it has two sequence ids
    assert pack(bytes(original)) == bytes(original)


def test_a_state_with_a_value_that_is_not_finite_is_kept_as_it_was() -> None:
    original = bytearray(state())
    at = 8 + 4 + 4 + 12 * 5 + 8 + 12
    original[at : at + 2] = np.array([np.inf], dtype=np.float16).tobytes()
    assert pack(bytes(original)) == bytes(original)


def test_a_damaged_packed_form_is_refused() -> None:
    packed = pack(state())
    assert unpack(packed[:-1]) is None  # cut short
    assert unpack(packed + b"\0") is None  # trailing bytes
    assert unpack(packed[: len(MARK) + 2]) is None  # cut inside the piece count
    wrong_kind = bytearray(packed)
    wrong_kind[len(MARK) + 4] = 7
    assert unpack(bytes(wrong_kind)) is None
    odd_blocks = bytearray(packed)
    # the first 8-bit piece claims one byte fewer: its body is no longer whole blocks, and the rest does not line up
    first_kind_at = len(MARK) + 4
    (_, first_length) = struct.unpack_from("<BQ", packed, first_kind_at)
    second_at = first_kind_at + 9 + first_length
    (kind, length) = struct.unpack_from("<BQ", packed, second_at)
    assert kind == 1
    struct.pack_into("<BQ", odd_blocks, second_at, 1, length - 1)
    assert unpack(bytes(odd_blocks)) is None


def test_the_store_holds_them_packed_in_memory_and_on_disk_and_gives_back_what_llama_cpp_loads(
    tmp_path: Path,
) -> None:
    original = state(cells=20, layers=4, width=128)
    loaded = unpack(pack(original))
    packed = PassageStore(shelf=PassageShelf(tmp_path, "model", 1 << 20))
    packed.put(None, [1, 2, 3], KeptPassage(original, 40))
    assert packed.size_bytes == len(pack(original)) < 0.56 * len(original)
    assert packed.get(None, [1, 2, 3]) == KeptPassage(loaded, 40)
    (on_disk,) = tmp_path.rglob("*.kv")
    assert on_disk.stat().st_size < 0.6 * len(original)
    after_restart = PassageStore(shelf=PassageShelf(tmp_path, "model", 1 << 20))
    assert after_restart.get(None, [1, 2, 3]) == KeptPassage(loaded, 40)

    as_computed = PassageStore(packed=False)
    as_computed.put(None, [1, 2, 3], KeptPassage(original, 40))
    assert as_computed.get(None, [1, 2, 3]) == KeptPassage(original, 40)
    assert as_computed.size_bytes == len(original)
