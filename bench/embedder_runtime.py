"""The embedded MiniLM run by sentence-transformers and by OpenVINO (rag.embedder_runtime), in the same run: how long
a fresh process takes to its first vector (imports, loading, one question embedded: what `hearth ingest` of one file
or a new page's first question about documents waits), and how fast each embeds a batch of real passages once
loaded; with how far apart the two runtimes' vectors are. Each way in a fresh interpreter, alternating, several
runs; the medians and the spread. The OpenVINO model is converted before the first run (once per machine) and that
conversion is timed apart.

    .venv/bin/python bench/embedder_runtime.py --runs 3 --out bench/data/embedder-runtime.txt [--texts FOLDER]

Run it alone on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, sys, time
from pathlib import Path
started = time.perf_counter()
runtime, cache, texts_file = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
from rag.retrieval.embeddings import default_embedder, embedded_minilm_path
if runtime == "openvino":
    from rag.retrieval.openvino_embedder import OpenVinoEmbedder
    embedder = OpenVinoEmbedder(embedded_minilm_path(), "all-MiniLM-L6-v2", cache)
else:
    embedder = default_embedder()
embedder.embed(["How do I keep the installed versions the same on every machine?"])
first = time.perf_counter() - started
texts = json.loads(texts_file.read_text())
started = time.perf_counter()
vectors = embedder.embed(texts)
batch = time.perf_counter() - started
out = Path(sys.argv[4])
import numpy as np
np.save(out, vectors)
print(json.dumps({"first_s": first, "batch_s": batch}))
"""
WAYS = ("sentence-transformers", "openvino")


def passages(folder: Path, count: int) -> list[str]:
    """``count`` passages of about 1,000 characters from the text files under ``folder``."""
    texts: list[str] = []
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".md", ".txt", ".rst") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.extend(text[i : i + 1000] for i in range(0, len(text) - 200, 1000))
    if len(texts) < count:
        raise SystemExit(f"{folder} holds {len(texts)} passages of 1,000 characters; {count} are wanted")
    step = len(texts) / count
    return [texts[int(i * step)] for i in range(count)]


def run(way: str, cache: Path, texts: Path, out: Path) -> dict[str, float]:
    ran = subprocess.run(
        [sys.executable, "-c", PROBE, way, str(cache), str(texts), str(out)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    result: dict[str, float] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    import numpy as np

    from rag.retrieval.embeddings import embedded_minilm_path
    from rag.retrieval.openvino_embedder import converted_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--texts", type=Path, default=Path("/usr/share/doc"), help="a folder of text files")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="embedder-runtime-"))
    cache = work / "cache"
    texts = work / "texts.json"
    texts.write_text(json.dumps(passages(args.texts, args.passages)))
    started = time.perf_counter()
    converted_model(embedded_minilm_path(), cache)
    conversion = time.perf_counter() - started
    results: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    for number in range(args.runs):
        for way in WAYS:
            results[way].append(run(way, cache, texts, work / f"{way}.npy"))
            print(f"run {number + 1}/{args.runs}, {way}: {results[way][-1]}", file=sys.stderr, flush=True)
    apart = float(np.abs(np.load(work / "openvino.npy") - np.load(work / "sentence-transformers.npy")).max())
    lines = [
        f"# {' '.join([Path(sys.executable).name, *sys.argv])}",
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()};"
        f" sentence-transformers {version('sentence-transformers')}, openvino {version('openvino')};"
        f" {args.runs} runs each, alternating, each in a fresh interpreter; {args.passages} passages of 1,000"
        f" characters from {args.texts}",
        f"converting the model for OpenVINO (once per machine): {conversion:.1f} s",
    ]
    for key, label in (("first_s", "a fresh process to its first vector"), ("batch_s", "the passages, loaded")):
        medians = {}
        for way in WAYS:
            values = [r[key] for r in results[way]]
            medians[way] = statistics.median(values)
            lines.append(f"{label}, {way}: median {medians[way]:.2f} s (runs {min(values):.2f}-{max(values):.2f} s)")
        lines.append(f"{label}, openvino / sentence-transformers: {medians['openvino'] / medians[WAYS[0]]:.2f}")
    lines.append(f"largest difference between the two runtimes' vector components: {apart:.1e}")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
