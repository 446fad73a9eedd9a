"""What splitting a model across workers costs per generated token on the network, and whether that makes answers
slower than this machine alone. Pure: measured link facts in, milliseconds and words out.

Per token, llama.cpp's RPC client waits once on each worker for what it computed (a round trip), and the bytes
cross each link: the hidden state into and out of each worker's layers (``embedding_length`` floats each way) and the
serialized graph llama.cpp sends with every step. When the output projection runs on the last worker, its logits
come back too (``vocab_size`` floats, by far the most: 196 KB for SmolLM2's 49,152-token vocabulary; `hearth bench
pipeline` measured about 220 KB per token then); so with CPU workers it runs here instead (:func:`output_here`).
``bench/lan_pipeline.py`` compares this estimate with links shaped by `tc`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FLOAT_BYTES = 4
GRAPH_BYTES_PER_STEP = 12_000  # the graph llama.cpp serializes for each step: measured 220 KB - 205 KB, rounded


@dataclass(frozen=True)
class LinkFacts:
    """A paired worker's link as measured through it (at pairing), and the device it serves."""

    round_trip_ms: float
    bytes_per_s: float  # 0: not measured
    address: str = ""
    device: str = "CPU"
    free_bytes: int = 0  # the worker's free memory when paired; 0: not known
    read_bytes_per_s: float = 0.0  # how fast the worker reads memory, which bounds its layers' speed; 0: not known


def output_here(devices: Sequence[str]) -> bool:
    """Whether the output projection (hidden state to logits) should run on this machine rather than on the worker
    that holds the last layers (``devices``: the workers' devices, in the order of the chain). On a CPU worker it
    would take about as long as here, and its logits would then cross the network with every token: here, only the
    hidden state does. A GPU computes it much faster than this CPU could, so it stays there."""
    return bool(devices) and devices[-1].startswith("CPU")


def bytes_per_token(vocab_size: int, embedding_length: int, workers: int, logits_back: bool = True) -> list[int]:
    """The bytes each worker's link carries per generated token, in the order of the chain; ``logits_back``: the last
    worker computes the output projection and sends the logits back."""
    hidden = embedding_length * FLOAT_BYTES
    return [
        hidden * 2 + GRAPH_BYTES_PER_STEP + (vocab_size * FLOAT_BYTES if logits_back and index == workers - 1 else 0)
        for index in range(workers)
    ]


def network_ms_per_token(
    links: Sequence[LinkFacts], vocab_size: int, embedding_length: int, logits_back: bool = True
) -> float:
    """The time a token waits on the links: one round trip per worker plus its bytes at the link's bandwidth."""
    total = 0.0
    sizes = bytes_per_token(vocab_size, embedding_length, len(links), logits_back)
    for link, size in zip(links, sizes, strict=True):
        total += link.round_trip_ms
        if link.bytes_per_s > 0:
            total += size / link.bytes_per_s * 1000
    return total


def slower_than_alone(network_ms: float, fits_here: bool, devices: Sequence[str]) -> str | None:
    """Why the split will answer more slowly than this machine alone, or None when it may not. Layers split across
    machines run one after another for a single answer, so CPU workers never make one answer faster; they add the
    network's time. Only a model too large for this machine, or a worker with a GPU, is a reason to split."""
    if not fits_here or any(not device.startswith("CPU") for device in devices):
        return None
    return (
        f"slower than this machine alone: the model fits here, the workers are CPUs, and each token also waits "
        f"about {network_ms:.1f} ms on the links (a round trip per worker and what crosses it); split a "
        "model when it does not fit here"
    )
