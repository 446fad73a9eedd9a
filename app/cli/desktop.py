"""``hearth desktop``: Hearth in its own window, one per data folder; the browser where no window can open."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from app.settings import Settings
from app.terminal_text import for_terminal
from models.shared.errors import HearthError

EXIT_OK = 0
ICON = Path(__file__).resolve().parents[1] / "desktop" / "hearth.png"


def run_desktop(
    settings: Settings,
    ui_arguments: Sequence[str],
    events_file: Path | None,
    keep_running: bool = False,
    verbose: bool = False,
) -> int:
    """``verbose``: Qt's and its web engine's messages stay on the terminal (else they go to logs/desktop.log)."""
    from app.desktop.single import SingleInstance
    from app.desktop.toolkit import check_toolkit, web_engine_environment
    from app.desktop.toolkit_log import send_toolkit_output_to_log
    from app.desktop.window import DesktopWindow, EventLog
    from app.paths import ensure_data_dir, resolve_data_paths

    paths = ensure_data_dir(resolve_data_paths(settings.home))
    single = SingleInstance(paths.root)
    if not single.acquire():
        if single.ask_to_show():
            print("Hearth is already open: its window was brought to the front.", flush=True)
            return EXIT_OK
        raise HearthError(
            "Another Hearth window holds this data folder but did not answer.",
            "Close it (or end its process), then launch Hearth again.",
        )
    try:
        missing = check_toolkit()
        if missing is not None:
            print(f"{for_terminal(missing.reason)} {for_terminal(missing.remedy)}", file=sys.stderr)
            print("Opening Hearth in your web browser instead.", file=sys.stderr, flush=True)
            from app.cli.commands import run_ui

            single.serve(lambda: _open_page_again(paths.root, paths.server_file))  # a later launch: the page again
            return int(run_ui(settings, open_browser=True))
        os.environ.update(web_engine_environment())
        if not verbose:
            send_toolkit_output_to_log(paths.logs_dir)
        icon = ICON if ICON.is_file() else None
        window = DesktopWindow(paths.root, ui_arguments, EventLog(events_file), icon, keep_running)
        single.serve(window.bring_to_front)
        window.run()
    finally:
        single.release()
    return EXIT_OK


def _open_page_again(root: Path, server_file: Path) -> None:
    from app.services.serving.instance import read_record
    from app.ui.open_page import open_in_browser

    record = read_record(server_file)
    if record is not None:
        open_in_browser(root, record.entry_url)
