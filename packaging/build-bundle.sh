#!/usr/bin/env bash
# `make package`: the self-contained Hearth folder, dist/hearth/ (PyInstaller, one folder), with the embedded models.
# A clean build each time (--clean): a module cached from an earlier build once went in stale.
# Run `dist/hearth/hearth desktop` (or `ui`, `chat`, …) on a machine without this checkout or a virtualenv.
# Linux only as written; see docs/packaging.md for Windows and macOS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
if [ ! -x "$PY" ]; then
    echo "error: $PY is missing; run \`make setup\` first." >&2
    exit 1
fi
# The build tool, pinned; installed into the project's environment the first time.
"$PY" -m pip install --quiet --disable-pip-version-check "pyinstaller==6.22.3" "pyinstaller-hooks-contrib==2026.9"
started=$(date +%s)
"$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath "$ROOT/dist" --workpath "$ROOT/build/pyinstaller" "$ROOT/packaging/hearth.spec"
echo "Built $ROOT/dist/hearth in $(( $(date +%s) - started )) s: $(du -sh "$ROOT/dist/hearth" | cut -f1)"
