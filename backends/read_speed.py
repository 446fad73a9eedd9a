"""How fast this machine reads memory: the figure that bounds how fast a CPU writes tokens (each one reads every
weight once, ``backends/roofline.py``), measured by summing a buffer larger than any cache, several slices at once."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

ROOFLINE_BYTES = 1 << 30
WORKER_BYTES = 256 << 20  # a worker measures itself at start: far beyond any cache, and quick


def read_bandwidth(threads: int, size_bytes: int = ROOFLINE_BYTES, repeats: int = 5) -> list[float]:
    """Bytes per second reading a ``size_bytes`` buffer, ``threads`` slices at once (numpy lets go of the interpreter
    lock while it sums), once per repeat; the first touch is not timed."""
    import numpy as np

    buffer = np.ones(size_bytes // 8, dtype=np.float64)
    slices = np.array_split(buffer, max(threads, 1))
    rates = []
    with ThreadPoolExecutor(len(slices)) as pool:
        list(pool.map(np.sum, slices))  # pages in
        for _ in range(repeats):
            started = time.perf_counter()
            list(pool.map(np.sum, slices))
            rates.append(size_bytes / max(time.perf_counter() - started, 1e-9))
    return rates
