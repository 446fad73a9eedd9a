#!/usr/bin/env bash
# The self-contained folder's smoke test: run it as a machine without this checkout would (no virtualenv, no
# PYTHONPATH, an empty home), and print its size, start times and memory at idle.
#   bash packaging/smoke-bundle.sh dist/hearth
# With a display (or Xvfb installed) it also opens the desktop window and waits for the chat in it.
set -euo pipefail
trap 'echo "FAILED at line $LINENO: $BASH_COMMAND" >&2' ERR
BUNDLE="$(cd "${1:?usage: $0 BUNDLE_FOLDER}" && pwd)"
HEARTH="$BUNDLE/hearth"
SCRATCH="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$SCRATCH"' EXIT
PORT=$(( 20000 + RANDOM % 20000 ))
clean_env=(env -i "HOME=$SCRATCH" "PATH=/usr/bin:/bin" "HEARTH_HOME=$SCRATCH/home" "LANG=C.UTF-8")
now() { date +%s.%N; }
tree_mib() {  # resident memory of a process and all its descendants, in MiB
    ps -e -o pid=,ppid=,rss= | awk -v root="$1" '
        { parent[$1] = $2; rss[$1] = $3 }
        END {
            for (p in parent) { q = p; while (q != "" && q != root && q != 1 && q != 0) q = parent[q]; if (q == root) s += rss[p] }
            printf "%.0f", s / 1024
        }'
}
since() { echo "$(now) - $1" | bc; }

echo "bundle: $BUNDLE ($(du -sh "$BUNDLE" | cut -f1))"

started=$(now)
answer=$("${clean_env[@]}" "$HEARTH" chat --max-tokens 16 "Say hello in three words." 2>"$SCRATCH/chat.err") || {
    cat "$SCRATCH/chat.err" >&2
    echo "FAILED: hearth chat" >&2
    exit 1
}
echo "chat from a cold start: $(since "$started") s: ${answer:0:80}"

started=$(now)
"${clean_env[@]}" "$HEARTH" ui --port "$PORT" >"$SCRATCH/ui.log" 2>&1 &
ui=$!
for _ in $(seq 1 240); do
    grep -q "Hearth is running at" "$SCRATCH/ui.log" && break
    kill -0 $ui 2>/dev/null || { cat "$SCRATCH/ui.log" >&2; echo "FAILED: hearth ui ended" >&2; exit 1; }
    sleep 0.5
done
grep -q "Hearth is running at" "$SCRATCH/ui.log" || { cat "$SCRATCH/ui.log" >&2; echo "FAILED: no page" >&2; exit 1; }
echo "page served after $(since "$started") s"
key=$("${clean_env[@]}" "$HEARTH" api-key)
model=""
for _ in $(seq 1 240); do  # the API lists the chat model once it has loaded
    listed=$(curl -s --max-time 10 -H "Authorization: Bearer $key" "http://127.0.0.1:$PORT/v1/models" || true)
    model=$(echo "$listed" | grep -o '"id":"[^"]*"' | cut -d'"' -f4 | grep -v -i minilm | head -1 || true)
    [ -n "$model" ] && break
    sleep 0.5
done
[ -n "$model" ] || { echo "FAILED: the API listed no chat model: $listed" >&2; exit 1; }
reply=$(curl -s --max-time 120 -H "Authorization: Bearer $key" -H "Content-Type: application/json" \
    -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hi.\"}],\"max_tokens\":8}" \
    "http://127.0.0.1:$PORT/v1/chat/completions")
echo "$reply" | grep -q '"choices"' || { echo "FAILED: the API did not answer: $reply" >&2; exit 1; }
sleep 5
echo "memory at idle (hearth ui and its engine): $(tree_mib $ui) MiB"
kill $ui
wait $ui || true

if [ -n "${DISPLAY:-}" ] || command -v Xvfb >/dev/null 2>&1; then
    if [ -z "${DISPLAY:-}" ]; then
        Xvfb :93 -screen 0 1280x900x24 -nolisten tcp >/dev/null 2>&1 &
        export DISPLAY=:93
        sleep 1
    fi
    started=$(now)
    "${clean_env[@]}" "DISPLAY=$DISPLAY" "$HEARTH" desktop --port "$PORT" --events "$SCRATCH/events.jsonl" \
        >"$SCRATCH/desktop.log" 2>&1 &
    desktop=$!
    for _ in $(seq 1 480); do
        grep -q '"page"' "$SCRATCH/events.jsonl" 2>/dev/null && break
        kill -0 $desktop 2>/dev/null || { cat "$SCRATCH/desktop.log" >&2; echo "FAILED: hearth desktop" >&2; exit 1; }
        sleep 0.25
    done
    grep -q '"page"' "$SCRATCH/events.jsonl" || { cat "$SCRATCH/desktop.log" >&2; echo "FAILED: no chat" >&2; exit 1; }
    echo "desktop window with the chat after $(since "$started") s (cold start to a usable window)"
    sleep 5
    echo "memory at idle (window, its web engine, server and engine): $(tree_mib $desktop) MiB"
    kill $desktop
    wait $desktop || true
fi
echo "smoke test passed"
