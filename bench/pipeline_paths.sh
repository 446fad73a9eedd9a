#!/usr/bin/env bash
# The split's speed through the private-socket path against the loopback-TCP path it replaced, measured
# alternately on this machine: `hearth bench pipeline` of this checkout and of commit 522e351 (the last with the
# TCP relay), ROUNDS rounds each, three times, then a summary of Hearth's split against one process in each run.
# Both use the patched llama.cpp (the patch only adds "unix:" endpoints; TCP works as before).
# Usage: bench/pipeline_paths.sh [ROUNDS]   (writes bench/data/pipeline-private-sockets*.json)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds="${1:-5}"
old="$(mktemp -d)/old"
git -C "$root" worktree add -q "$old" 522e351
trap 'git -C "$root" worktree remove --force "$old"' EXIT
for i in 1 2 3; do
    "$root/.venv/bin/python" -m app bench pipeline --users 1 --runs "$rounds" \
        --json "$root/bench/data/pipeline-private-sockets-new-$i.json" 2>/dev/null
    (cd "$old" && PYTHONPATH="$old" "$root/.venv/bin/python" -m app bench pipeline --users 1 --runs "$rounds" \
        --json "$root/bench/data/pipeline-private-sockets-old-$i.json" 2>/dev/null)
done
"$root/.venv/bin/python" - "$root/bench/data" <<'PY'
import json, statistics, sys
from pathlib import Path

folder = Path(sys.argv[1])
summary = {"command": "bench/pipeline_paths.sh", "paths": {}}
for path in ("new", "old"):
    runs = [json.loads((folder / f"pipeline-private-sockets-{path}-{i}.json").read_text()) for i in (1, 2, 3)]
    split = [next(r for r in run["rows"] if r["plan"] == "split (Hearth)") for run in runs]
    ratios = [run["split_vs_one_process"]["median"] for run in runs]
    summary["paths"][path] = {
        "split_tokens_per_s": [round(s["aggregate_tokens_per_s"], 1) for s in split],
        "split_vs_one_process_median_per_run": [round(r, 3) for r in ratios],
        "split_vs_one_process_median": round(statistics.median(ratios), 3),
        "bytes_per_token": [round(s["bytes_per_token"]) for s in split],
    }
new, old = summary["paths"]["new"], summary["paths"]["old"]
summary["new_vs_old"] = round(new["split_vs_one_process_median"] / old["split_vs_one_process_median"], 3)
(folder / "pipeline-private-sockets.json").write_text(json.dumps(summary, indent=2) + "\n")
print(json.dumps(summary, indent=2))
PY
