"""A network link between this machine and a network namespace, shaped in user space: two TUN devices, one on each
side, and this process carrying each IP packet from one to the other after a delay, at a rate, or not at all (loss).
It stands in for `tc netem` where the kernel lacks it (this one answers "Specified qdisc kind is unknown"): the
packets are real, so TCP sees real delay and real loss and recovers from them as it would on a network.

    sudo .venv/bin/python bench/tun_link.py --namespace NS --delay-ms 0.5 --loss 0.01

makes `hlan0` here (10.77.0.1) and `hlan1` inside NS (10.77.0.2), prints `ready` on a line of its own, and carries
packets until SIGTERM. SIGUSR1 cuts the link (every packet dropped, both ways) and a second SIGUSR1 mends it.
Its own cost (a packet crosses Python twice) shows as the round trip Hearth measures through it unshaped.
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import os
import random
import select
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
MAX_PACKET = 65535


@dataclass(frozen=True)
class Shape:
    """One direction of the link, as netem spells it: `delay`, `rate`, `loss`."""

    one_way_ms: float = 0.0
    loss: float = 0.0  # the share of packets dropped, 0 to 1
    bits_per_s: float = 0.0  # 0: as fast as this process carries them


class Direction:
    """When each packet entering one end leaves the other, or None when it is lost. Pure: the caller gives the time,
    and the random draws come from the generator it passes, so a seed repeats the same losses."""

    def __init__(self, shape: Shape, draws: random.Random) -> None:
        if not 0.0 <= shape.loss <= 1.0:
            raise ValueError(f"loss is a share from 0 to 1, not {shape.loss}")
        if shape.one_way_ms < 0 or shape.bits_per_s < 0:
            raise ValueError("delay and rate cannot be negative")
        self.shape = shape
        self.draws = draws
        self.cut = False
        self._wire_free_at = 0.0  # when the last admitted packet has finished going onto the wire

    def admit(self, now: float, size: int) -> float | None:
        if self.cut or (self.shape.loss > 0 and self.draws.random() < self.shape.loss):
            return None
        sent = now
        if self.shape.bits_per_s > 0:  # a packet waits for the one before it to be sent, then takes its own time
            sent = max(now, self._wire_free_at) + size * 8 / self.shape.bits_per_s
            self._wire_free_at = sent
        return sent + self.shape.one_way_ms / 1000


def open_tun(name: str) -> int:
    descriptor = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(descriptor, TUNSETIFF, struct.pack("16sH22x", name.encode(), IFF_TUN | IFF_NO_PI))
    return descriptor


def ip(*arguments: str, namespace: str | None = None) -> None:
    prefix = ("ip", "netns", "exec", namespace) if namespace else ()
    subprocess.run((*prefix, "ip", *arguments), check=True, capture_output=True, text=True)


def carry(ends: tuple[int, int], directions: tuple[Direction, Direction]) -> None:
    """Moves packets between the two TUN descriptors until SIGTERM: direction 0 from ends[0] to ends[1]."""
    queues: tuple[collections.deque[tuple[float, bytes]], ...] = (collections.deque(), collections.deque())
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    def toggle_cut(*_: object) -> None:
        for direction in directions:
            direction.cut = not direction.cut
        for queue in queues:
            queue.clear()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGUSR1, toggle_cut)
    while not stopping:
        now = time.monotonic()
        due = [queue[0][0] for queue in queues if queue]
        timeout = max(0.0, min(due) - now) if due else 0.2
        try:
            readable, _, _ = select.select(ends, [], [], timeout)
        except InterruptedError:
            continue
        now = time.monotonic()
        for index, end in enumerate(ends):
            if end in readable:
                packet = os.read(end, MAX_PACKET)
                leaves = directions[index].admit(now, len(packet))
                if leaves is not None:
                    queues[index].append((leaves, packet))
        now = time.monotonic()
        for index, queue in enumerate(queues):
            while queue and queue[0][0] <= now:
                os.write(ends[1 - index], queue.popleft()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespace", required=True, help="an existing network namespace (ip netns add NAME)")
    parser.add_argument("--here", default="hlan0")
    parser.add_argument("--there", default="hlan1")
    parser.add_argument("--here-ip", default="10.77.0.1")
    parser.add_argument("--there-ip", default="10.77.0.2")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="round-trip delay, split evenly both ways")
    parser.add_argument("--loss", type=float, default=0.0, help="share of packets lost each way, 0 to 1")
    parser.add_argument("--rate", type=float, default=0.0, help="bits per second each way (0: unlimited)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    shape = Shape(one_way_ms=args.delay_ms / 2, loss=args.loss, bits_per_s=args.rate)
    draws = random.Random(args.seed)
    directions = (Direction(shape, draws), Direction(shape, draws))
    ends = (open_tun(args.here), open_tun(args.there))
    ip("link", "set", args.there, "netns", args.namespace)
    ip("addr", "add", args.here_ip, "peer", f"{args.there_ip}/32", "dev", args.here)
    ip("link", "set", args.here, "up")
    ip("addr", "add", args.there_ip, "peer", f"{args.here_ip}/32", "dev", args.there, namespace=args.namespace)
    ip("link", "set", args.there, "up", namespace=args.namespace)
    print("ready", flush=True)
    carry(ends, directions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
