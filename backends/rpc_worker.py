"""``python -m backends.rpc_worker HOST:PORT CACHE_DIR THREADS PARENT_PID [DEVICE]``: the process ``hearth worker``
starts to serve this machine's CPU (or the GPU DEVICE names, as ``cuda:N``) over llama.cpp's RPC (the call blocks in
C for good, so it lives in a process of its own that ``hearth worker`` ends on Ctrl+C)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from backends.parent_death import end_with_parent
from backends.rpc import parse_endpoint, serve


def main(argv: list[str]) -> int:
    endpoint, cache_dir, threads, parent, *device = argv
    end_with_parent(signal.SIGKILL, int(parent))  # a killed `hearth worker` takes its server with it
    serve(parse_endpoint(endpoint), Path(cache_dir), int(threads), *device[:1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
