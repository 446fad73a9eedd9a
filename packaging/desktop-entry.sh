#!/usr/bin/env bash
# The app-menu entry and icon for the current user (freedesktop): `make install-desktop`, `make uninstall-desktop`.
#   bash packaging/desktop-entry.sh install|uninstall
# The entry starts this checkout's Hearth (`.venv/bin/hearth desktop`); XDG_DATA_HOME decides where it goes
# (default ~/.local/share). Nothing outside that folder is touched.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="${XDG_DATA_HOME:-$HOME/.local/share}"
ENTRY="$DATA/applications/hearth.desktop"
ICON="$DATA/icons/hicolor/512x512/apps/hearth.png"
HEARTH="${HEARTH_EXECUTABLE:-$ROOT/.venv/bin/hearth}"

refresh() {  # let the desktop notice now rather than at the next login, where the tools exist
    command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$DATA/applications" || true
    command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
}

case "${1:-}" in
install)
    if [ ! -x "$HEARTH" ]; then
        echo "error: $HEARTH is not there; run \`make setup\` first (or set HEARTH_EXECUTABLE)." >&2
        exit 1
    fi
    case "$HEARTH" in
    *[\"\`\$\\]*)
        echo "error: the path $HEARTH holds a quote, backtick, dollar or backslash; move the checkout." >&2
        exit 1
        ;;
    esac
    mkdir -p "$(dirname "$ENTRY")" "$(dirname "$ICON")"
    install -m 0644 "$ROOT/app/desktop/hearth.png" "$ICON"
    cat >"$ENTRY.tmp" <<ENTRY
[Desktop Entry]
Type=Application
Name=Hearth
GenericName=Offline AI assistant
Comment=Chat with a local model about your own documents; nothing leaves this computer
Exec="$HEARTH" desktop
TryExec=$HEARTH
Icon=hearth
Terminal=false
Categories=Utility;
Keywords=AI;assistant;chat;LLM;documents;offline;
StartupNotify=true
StartupWMClass=Hearth
ENTRY
    mv "$ENTRY.tmp" "$ENTRY"
    refresh
    echo "Added Hearth to your app menu: $ENTRY"
    ;;
uninstall)
    rm -f "$ENTRY" "$ICON"
    refresh
    echo "Removed Hearth from your app menu."
    ;;
*)
    echo "usage: $0 install|uninstall" >&2
    exit 2
    ;;
esac
