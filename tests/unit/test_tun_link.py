"""The user-space link that stands in for netem in the LAN bench: when a packet leaves, or whether it is lost."""

from __future__ import annotations

import random

import pytest

from bench.tun_link import Direction, Shape


def test_a_delay_holds_each_packet_the_same_time_and_keeps_their_order() -> None:
    way = Direction(Shape(one_way_ms=2.5), random.Random(1))
    leaving = [way.admit(now, 1500) for now in (10.0, 10.0001, 10.5)]
    assert leaving == pytest.approx([10.0025, 10.0026, 10.5025])


def test_a_rate_queues_packets_behind_each_other_then_adds_the_delay() -> None:
    way = Direction(Shape(one_way_ms=1.0, bits_per_s=8_000_000), random.Random(1))  # 1 MB/s: 1000 bytes take 1 ms
    first, second = way.admit(0.0, 1000), way.admit(0.0, 1000)
    later = way.admit(1.0, 1000)  # the wire is free again by then
    assert (first, second, later) == pytest.approx((0.002, 0.003, 1.002))


def test_loss_drops_about_its_share_and_a_seed_repeats_the_same_packets() -> None:
    def lost(seed: int) -> list[int]:
        way = Direction(Shape(loss=0.05), random.Random(seed))
        return [i for i in range(20_000) if way.admit(float(i), 100) is None]

    assert 800 < len(lost(3)) < 1200
    assert lost(3) == lost(3)
    assert lost(3) != lost(4)


def test_a_cut_link_drops_everything_until_it_is_mended() -> None:
    way = Direction(Shape(), random.Random(1))
    way.cut = True
    assert way.admit(1.0, 100) is None
    way.cut = False
    assert way.admit(2.0, 100) == 2.0


@pytest.mark.parametrize("shape", [Shape(loss=1.5), Shape(loss=-0.1), Shape(one_way_ms=-1), Shape(bits_per_s=-1)])
def test_an_impossible_shape_is_refused(shape: Shape) -> None:
    with pytest.raises(ValueError):
        Direction(shape, random.Random(1))
