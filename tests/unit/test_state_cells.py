"""A sequence's state laid out cell by cell (``backends.llamacpp.caches.state_cells``), on states laid out as llama.cpp
writes them: a span cut out keeps its cells' positions and rows; two states joined give one cell list in order; a
state is rewritten for a context with another count of streams; anything laid out otherwise is refused."""

from __future__ import annotations

import struct

from backends.llamacpp.caches.state_cells import for_streams, joined, layout, sliced
from tests.unit.test_kept_state import state


def cells(data: bytes) -> list[tuple[int, list[bytes]]]:
    """Each cell's position and its rows (every layer's key, then value), as the layout reads them."""
    found = layout(data)
    assert found is not None
    return [
        (position, [found.state[part.start + n * part.row_bytes :][: part.row_bytes] for part in found.rows])
        for n, position in enumerate(found.positions)
    ]


def test_a_span_cut_out_keeps_its_cells_positions_and_rows() -> None:
    whole = state(cells=10, layers=2, width=64)
    span = sliced(whole, lambda position: 43 <= position < 47)  # the fixture's positions are 40-49
    assert span is not None
    assert cells(span) == cells(whole)[3:7]
    empty = sliced(whole, lambda _position: False)
    assert empty is not None and cells(empty) == []


def test_two_states_joined_are_one_list_of_cells_in_order() -> None:
    first, then = state(cells=4, seed=1), state(cells=3, seed=2)
    both = joined(first, then)
    assert both is not None and cells(both) == cells(first) + cells(then)
    nothing = sliced(first, lambda _position: False)
    assert nothing is not None
    assert joined(nothing, then) is not None and cells(joined(nothing, then) or b"") == cells(then)
    assert cells(joined(first, nothing) or b"") == cells(first)
    assert joined(first, state(cells=3, width=128)) is None  # other layers: another model
    assert joined(first, b"not a state") is None


def test_a_state_is_rewritten_for_another_count_of_streams() -> None:
    four = state(cells=5, streams=4)
    one = for_streams(four, 1)
    assert struct.unpack_from("<I", one, 8) == (1,) and cells(one) == cells(four)
    assert cells(for_streams(one, 4)) == cells(four)
    assert for_streams(four, 4) is four  # already fits: untouched
    assert for_streams(b"not a state", 2) == b"not a state"


def test_a_state_laid_out_otherwise_has_no_layout() -> None:
    assert layout(state(transposed=1)) is None
    assert layout(state()[:-1]) is None
    assert layout(state() + b"\0") is None
    several = bytearray(state())
    struct.pack_into("<I", several, 20, 2)  # the first cell says it has two sequence ids
    assert layout(bytes(several)) is None
    assert sliced(b"\xd8\x3c\x14\xaf", lambda _position: True) is None
