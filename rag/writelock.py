"""One lock, between processes, around each "store a file's chunks, then record it" step of ingestion.

Reconciliation removes chunks that no manifest row owns; a file whose chunks are written but not yet recorded
looks exactly like that. Writers hold the lock shared for that short step (several may write at once), and
reconciliation holds it exclusively, so it only ever sees chunks whose writer has recorded them or has died. The
operating system releases the lock of a killed process, so a crash never leaves it held.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RETRY_S = 0.05


class WriteLock:
    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._held(exclusive=False):
            yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._held(exclusive=True):
            yield

    @contextmanager
    def _held(self, exclusive: bool) -> Iterator[None]:
        # A descriptor of its own each time: the lock then also separates threads of one process.
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _lock(descriptor, exclusive)
            try:
                yield
            finally:
                _unlock(descriptor)
        finally:
            os.close(descriptor)


if sys.platform == "win32":
    import msvcrt

    def _lock(descriptor: int, exclusive: bool) -> None:
        # Windows has no shared byte-range lock in msvcrt: writers simply take turns there.
        while True:
            try:
                msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)
                return
            except OSError:
                time.sleep(RETRY_S)

    def _unlock(descriptor: int) -> None:
        os.lseek(descriptor, 0, os.SEEK_SET)
        msvcrt.locking(descriptor, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(descriptor: int, exclusive: bool) -> None:
        fcntl.flock(descriptor, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)

    def _unlock(descriptor: int) -> None:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
