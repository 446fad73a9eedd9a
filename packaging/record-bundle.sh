#!/usr/bin/env bash
# `make package-record`: build the self-contained folder and run its smoke test, keeping what both printed, with
# the machine and the commit, in the file named (bench/data/bundle-smoke.txt). The file is written only when both
# passed; a failure is printed and the file left as it was.
#   bash packaging/record-bundle.sh bench/data/bundle-smoke.txt
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: $0 OUTPUT_FILE}"
SCRATCH="$(mktemp)"
INPUTS="packaging/hearth.spec packaging/bundle_entry.py packaging/build-bundle.sh packaging/smoke-bundle.sh"
trap 'rm -f "$SCRATCH"' EXIT
{
    echo "# make package-record — $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores," \
        "$(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(uname -sr)"
    echo "# commands: bash packaging/build-bundle.sh; bash packaging/smoke-bundle.sh dist/hearth"
    # What the build was made from: a change to any of these after the record fails a unit test until it is rebuilt
    # (tests/unit/test_bundle_record.py).
    for input in $INPUTS; do
        echo "# input: $input sha256 $(sha256sum "$ROOT/$input" | cut -d' ' -f1)"
    done
    bash "$ROOT/packaging/build-bundle.sh"
    bash "$ROOT/packaging/smoke-bundle.sh" "$ROOT/dist/hearth"
} 2>&1 | tee "$SCRATCH"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo "FAILED (exit $status): $OUT left as it was" >&2
    exit "$status"
fi
cp "$SCRATCH" "$OUT"
echo "kept in $OUT"
