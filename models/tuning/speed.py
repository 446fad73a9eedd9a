"""This CPU's speed at plain matrix products in torch (float32), in operations per second: what the time
estimate of a tuning run is scaled by (``models.tuning.estimate``). Run as ``python -m models.tuning.speed
THREADS`` in a process of its own, so the page's process never imports torch; it prints one number."""

from __future__ import annotations

import sys
import time

SIZE = 1024  # a layer's width in a small model: big enough to run at the CPU's full speed
WINDOWS = 8  # the fastest of several short windows: another program's moment on the CPU does not count
WINDOW_S = 0.1


def matmul_flops(threads: int, windows: int = WINDOWS, window_s: float = WINDOW_S) -> float:
    import torch

    torch.set_num_threads(max(1, threads))
    left, right = torch.randn(SIZE, SIZE), torch.randn(SIZE, SIZE)
    for _ in range(3):  # warm up: the thread pool starts, the caches fill
        torch.matmul(left, right)
    best = 0.0
    for _ in range(windows):
        products = 0
        started = time.perf_counter()
        while (elapsed := time.perf_counter() - started) < window_s:
            torch.matmul(left, right)
            products += 1
        best = max(best, 2.0 * SIZE**3 * products / elapsed)
    return best


if __name__ == "__main__":
    print(f"{matmul_flops(int(sys.argv[1]) if len(sys.argv) > 1 else 1):.0f}")
