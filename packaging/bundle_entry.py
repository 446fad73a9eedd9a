"""The entry point of the self-contained build (PyInstaller): ``hearth`` itself, and every child Hearth starts.

Hearth starts its helpers as ``sys.executable -m MODULE …`` (the engine, the document reader, the tuning worker,
the desktop window's server), ``sys.executable -I SCRIPT …`` (the chat-template sandbox) and ``sys.executable -c
CODE`` (the window toolkit's check). In the bundle ``sys.executable`` is this program, so it understands those
three forms as Python would; anything else is the ``hearth`` command line. Spawned multiprocessing children are
PyInstaller's (``freeze_support``).
"""

from __future__ import annotations

import multiprocessing
import runpy
import sys


def main() -> int:
    multiprocessing.freeze_support()
    argv = sys.argv
    if len(argv) >= 3 and argv[1] == "-m":
        sys.argv = [argv[2], *argv[3:]]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        return 0
    if len(argv) >= 3 and argv[1] == "-I":
        sys.argv = [argv[2], *argv[3:]]
        runpy.run_path(argv[2], run_name="__main__")
        return 0
    if len(argv) >= 3 and argv[1] == "-c":
        sys.argv = ["-c", *argv[3:]]
        exec(compile(argv[2], "<string>", "exec"), {"__name__": "__main__"})  # Hearth's own probes only
        return 0
    from app.cli.main import main as hearth

    return hearth()


if __name__ == "__main__":
    raise SystemExit(main())
