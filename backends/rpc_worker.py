"""``python -m backends.rpc_worker HOST:PORT CACHE_DIR THREADS``: the process ``hearth worker`` starts to serve
this machine's CPU over llama.cpp's RPC (the call blocks in C for good, so it lives in a process of its own that
``hearth worker`` ends on Ctrl+C)."""

from __future__ import annotations

import sys
from pathlib import Path

from backends.rpc import parse_endpoint, serve


def main(argv: list[str]) -> int:
    endpoint, cache_dir, threads = argv
    _end_with_parent()
    serve(parse_endpoint(endpoint), Path(cache_dir), int(threads))
    return 0


def _end_with_parent() -> None:
    """A `hearth worker` that is killed takes its server with it (Linux; elsewhere it ends on Ctrl+C only). Its
    main thread started this process and lives as long as it does, so the parent-death signal fires then."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import os
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before the request took hold
        os._exit(1)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
