"""`hearth repair`: check every store and rebuild the damaged ones, keeping everything that can be read."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.container import enforce_offline
from app.services.upkeep.repair import (
    Note,
    StoreReport,
    check_stores,
    refuse_if_running,
    reindex_collections,
    repair_stores,
)
from app.settings import Settings
from app.terminal_text import for_terminal
from models.shared.wording import plural

EXIT_OK = 0
EXIT_NOT_ALL_SAVED = 1

STATES = {
    "sound": "sound",
    "missing": "not created yet (nothing to check)",
    "damaged": "DAMAGED",
    "unreadable": "could not be checked",
}


def run_repair(settings: Settings, check_only: bool) -> int:
    enforce_offline()
    paths = ensure_data_dir(resolve_data_paths(settings.home))
    if not check_only:
        refuse_if_running(paths)
    print(f"Checking Hearth's stores in {for_terminal(str(paths.root))}…", file=sys.stderr, flush=True)
    checked = check_stores(paths)
    if check_only:
        for report in checked:
            _print(report)
        damaged = [r for r in checked if r.health.state in ("damaged", "unreadable")]
        if damaged:
            print("\nRun `hearth repair` (with Hearth stopped) to rebuild the damaged stores; it deletes nothing.")
        else:
            print("\nEvery store is sound.")
        return EXIT_NOT_ALL_SAVED if damaged else EXIT_OK

    def say(line: str) -> None:
        print(f"  {for_terminal(line)}", file=sys.stderr, flush=True)

    def reindex(lost_chunks_of: set[str]) -> Iterator[Note]:
        return reindex_collections(settings, paths, lost_chunks_of, say)

    failed = False
    for report in repair_stores(paths, reindex, checked):
        _print(report)
        failed = failed or report.failed
    if failed:
        print(
            "\nSome data could not be saved (see above). The damaged files are kept beside the new ones, renamed "
            "*.damaged-DATE: a backup, or a specialist SQLite recovery tool, may get more out of them."
        )
        return EXIT_NOT_ALL_SAVED
    repaired = any(r.health.state == "damaged" for r in checked)
    print("\nEverything readable was kept." if repaired else "\nEvery store is sound; nothing was changed.")
    return EXIT_OK


def _print(report: StoreReport) -> None:
    print(f"{report.store}: {for_terminal(str(report.path))}")
    state = STATES[report.health.state]
    detail = f" ({report.health.detail})" if report.health.detail else ""
    counts = report.health.collections
    if report.health.state == "sound" and counts:
        detail = f" ({plural(sum(counts.values()), 'chunk')} in {plural(len(counts), 'collection')})"
    print(f"  {state}{for_terminal(detail)}")
    for line in report.done:
        print(f"  - {for_terminal(line)}")
    for line in report.lost:
        print(f"  ! not saved: {for_terminal(line)}")
    for line in report.to_do:
        print(f"  > to do: {for_terminal(line)}")
