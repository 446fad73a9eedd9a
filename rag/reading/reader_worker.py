"""``python -m rag.reading.reader_worker FD``: the process that reads documents for :mod:`rag.reading.reader`, one file
per request, under a memory limit (RLIMIT_AS where the system has it) and a CPU-time limit per file (so that a parser
stuck on a hostile file cannot outlive the parent for long). It ignores Ctrl+C: the parent decides when it ends, and it
ends by itself when the parent goes away."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

from rag.reading.limits import too_much_memory
from rag.reading.read_progress import pages_reported_to
from rag.reading.reader_protocol import ReadProgress, ReadReply, ReadRequest, Start
from rag.reading.sections import Skipped

# CPU seconds a request may use beyond its wall-clock limit before the kernel ends the process (the parent
# normally stops it first, at the wall-clock limit).
CPU_GRACE_S = 30
# Least time between two progress messages to the parent (a loader may report thousands of pages a second).
PROGRESS_INTERVAL_S = 0.2


def _limit_memory(limit_bytes: int) -> None:
    """Where the system has no address-space limit (Windows; macOS does not enforce it), the parent watches the
    resident size instead."""
    try:
        import resource
    except ImportError:
        return
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def _limit_cpu(seconds: float) -> None:
    try:
        import resource
    except ImportError:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds + CPU_GRACE_S)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


class _ProgressSender:
    """Passes a loader's page counts to the parent, no more often than every ``PROGRESS_INTERVAL_S`` (the last page
    always). A parent that has gone is noticed at the reply."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        with contextlib.suppress(OSError):
            self._conn.send(ReadProgress(done, total))


def _read(request: ReadRequest, conn: Connection) -> ReadReply:
    from rag.reading.loaders import load_file

    try:
        with pages_reported_to(_ProgressSender(conn)):
            sections = load_file(Path(request.path), request.limits)
        return ReadReply(sections=sections)
    except Skipped as skipped:
        return ReadReply(reason=skipped.reason)
    except MemoryError:
        return ReadReply(reason=too_much_memory(request.limits), restart=True)


def serve(conn: Connection) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        start = conn.recv()
    except (EOFError, OSError):
        return 0
    if not isinstance(start, Start):
        return 1
    _limit_memory(start.memory_bytes)
    logging.basicConfig(level=start.log_level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for name in start.quiet_loggers:
        logging.getLogger(name).setLevel(logging.ERROR)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return 0  # the parent has gone
        if not isinstance(request, ReadRequest):
            return 0
        _limit_cpu(request.limits.timeout_s)
        reply = _read(request, conn)
        try:
            conn.send(reply)
        except OSError:
            return 0
        if reply.restart:
            return 0


if __name__ == "__main__":
    sys.exit(serve(Connection(int(sys.argv[1]))))
