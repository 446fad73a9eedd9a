"""``python -m backends.workers.rpc_server unix:PATH CACHE_DIR THREADS PARENT_PID [DEVICE]``: the process
``hearth worker`` starts to serve this machine's CPU (or the GPU DEVICE names, as ``cuda:N``) over llama.cpp's RPC
on the Unix socket PATH, inside a folder only this account may enter (the call blocks in C for good, so it lives in
a process of its own that ``hearth worker`` ends on Ctrl+C)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from backends.local_socket import parse_local
from backends.parent_death import end_with_parent
from backends.workers.rpc import serve


def main(argv: list[str]) -> int:
    where_text, cache_dir, threads, parent, *device = argv
    end_with_parent(signal.SIGKILL, int(parent))  # a killed `hearth worker` takes its server with it
    where = parse_local(where_text)
    if where is None:
        print(f"rpc_worker serves on a Unix socket only (unix:PATH), not {where_text!r}", file=sys.stderr)
        return 2
    serve(where, Path(cache_dir), int(threads), *device[:1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
