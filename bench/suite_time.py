"""The whole suite's time, per test file, as one record: the parts a `make test` run left in test-artifacts/
(``tests/suite_clock.py`` writes one per pytest run: unit, integration, e2e) joined with the commit, the machine and
its load, and the heaviest files listed.

    make test; .venv/bin/python bench/suite_time.py [--output bench/data/suite-time.files.json]

A unit test holds every integration and e2e test file to an entry in the record, so a new file's cost is seen.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("unit", "integration", "e2e")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def joined(parts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    files: dict[str, Any] = {}
    for part in parts.values():
        files.update(part["files"])
    return {
        "command": "make test, then .venv/bin/python bench/suite_time.py",
        "commit": _commit(),
        "machine": {"cpu": _cpu(), "cores": os.cpu_count()},
        "parts": {
            name: {key: part[key] for key in ("wall_s", "finished", "load_average", "ci", "exit_status")}
            | {"tests": sum(f["tests"] for f in part["files"].values())}
            for name, part in parts.items()
        },
        "total_s": round(sum(part["wall_s"] for part in parts.values()), 1),
        "files": dict(sorted(files.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", type=Path, default=ROOT / "test-artifacts")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "data" / "suite-time.files.json")
    args = parser.parse_args(argv)
    parts = {}
    for name in PARTS:
        path = args.artifacts / f"suite-time.{name}.json"
        if not path.exists():
            print(f"{path} is missing: run `make test` first (each of its pytest runs writes one).", file=sys.stderr)
            return 1
        parts[name] = json.loads(path.read_text())
    record = joined(parts)
    args.output.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{record['total_s'] / 60:.1f} min in all on {record['machine']['cpu']} ({record['machine']['cores']} cores)")
    for name, part in record["parts"].items():
        print(f"  {name}: {part['wall_s'] / 60:.1f} min, {part['tests']} tests, load {part['load_average']}")
    print("heaviest files:")
    heaviest = sorted(record["files"].items(), key=lambda item: -item[1]["seconds"])[:25]
    for path, entry in heaviest:
        print(f"  {entry['seconds']:8.1f} s  {entry['tests']:3d} tests  {path}")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
