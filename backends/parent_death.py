"""A child process that ends with its parent, however the parent ends (Linux's ``PR_SET_PDEATHSIG``).

The signal fires when the *thread* that started the child ends, so only children started from a thread that lives as
long as its process (the main thread, or a driver thread that outlives them) may use it. Elsewhere than Linux it
does nothing: the parent stops the child when it ends normally, and a killed parent leaves it running.
"""

from __future__ import annotations

import os
import sys

_PR_SET_PDEATHSIG = 1


def end_with_parent(signal_number: int, parent: int) -> None:
    """Have ``signal_number`` sent to this process when its parent dies; send it now if ``parent`` is already gone
    (this process was handed to another parent before the request took hold)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal_number, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal_number)
