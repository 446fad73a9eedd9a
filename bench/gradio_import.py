"""How long importing Gradio takes as installed, with only its stub writer off, and as Hearth imports it (stub writer
off and the MCP SDK left out of ``gradio.mcp``; app/gradio_stubs.py): each in a fresh interpreter, alternating,
several runs; the medians and the spread.

    .venv/bin/python bench/gradio_import.py --runs 5 --out bench/data/gradio-import.txt

Run it alone on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

# The middle way imports the MCP SDK modules gradio.mcp asks for before Gradio, so that they are paid for as before.
SDK = "import mcp.types, mcp.server, mcp.server.sse, mcp.server.streamable_http_manager"
WAYS = {
    "as installed (plain `import gradio`)": "import gradio",
    "stub writer off, MCP SDK imported": f"import app; {SDK}; import gradio",
    "as Hearth imports it (`import app, gradio`)": "import app, gradio",
}


def timed(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    timed("import gradio")  # the first import reads the files from disk; it is not counted
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(args.runs):
        for way, code in WAYS.items():
            seconds[way].append(timed(code))
    lines = [
        f"# {' '.join([Path(sys.executable).name, *sys.argv])}",
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()};"
        f" gradio {version('gradio')}; {args.runs} runs each, alternating, each in a fresh interpreter",
    ]
    for way, runs in seconds.items():
        spread = f"{min(runs):.2f}-{max(runs):.2f}"
        lines.append(f"{way}: median {statistics.median(runs):.2f} s (runs {spread} s)")
    installed, writer_off, hearth = (statistics.median(runs) for runs in seconds.values())
    lines.append(f"stub writer off / as installed: {writer_off / installed:.2f}")
    lines.append(f"as Hearth imports it / as installed: {hearth / installed:.2f}")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
