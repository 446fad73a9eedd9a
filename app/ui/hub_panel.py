"""The Models tab's Hugging Face Hub section: the curated models, a search of the hub, and Install with its progress
(the install itself runs as the tab's other installs do, one at a time in the background). Wiring only: the work is
in ``app.services.catalog``, the words and tables in ``app.ui.hub_view``.

Like the rest of the tab, each handler answers in the section's own line, never with an error dialog.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr

from app.services.catalog.hub_installs import search_hub, unfinished_downloads
from app.services.catalog.installs import InstallJobs
from app.services.container import Services
from app.ui import cancel_button
from app.ui import hub_view as view
from models.hub_catalog import HUB_CATALOG
from models.shared.errors import HearthError
from models.store import ModelStore

SEARCH_LIMIT = 10


class HubPanel:
    def __init__(self, services: Services, installs: InstallJobs, open_store: Callable[[], ModelStore]) -> None:
        self.services = services
        self.installs = installs
        self._open_store = open_store
        self._rows = view.curated_rows(HUB_CATALOG.values())  # what the table shows now: curated, or a search

    def _installed(self) -> dict[str, str]:
        """Installed models by their file's name (how a hub file is recognised before its bytes are fetched)."""
        try:
            store = self._open_store()
        except HearthError:
            return {}
        try:
            return {stored.path.name: stored.id for stored in store.all()}
        except HearthError:
            return {}
        finally:
            store.close()

    def table(self) -> list[list[Any]]:
        return view.hub_table(self._rows, self._installed(), self.services.inventory.ram_available_bytes)

    def first_view(self) -> tuple[Any, ...]:
        """(table, picker, line) as the tab opens: the curated models, or the last search; a download left
        unfinished before is named and picked, so that one press of Install goes on with it."""
        line, picked = "", None
        if not self.installs.running():
            unfinished = unfinished_downloads(self.services.paths.models_dir)
            if unfinished:
                line, picked = view.unfinished_line(unfinished), unfinished[0].reference
                if picked not in {row.choice for row in self._rows}:  # from a search before a restart
                    self._rows = [view.unfinished_row(unfinished[0]), *self._rows]
        choices = view.hub_choices(self._rows)
        return self.table(), gr.update(choices=choices, value=picked) if picked else gr.update(choices=choices), line

    def search(self, text: str) -> Iterator[tuple[Any, ...]]:
        """(line, table, picker): asks the hub, once, for GGUF repositories matching ``text``."""
        if not (text or "").strip():
            yield "Type a few letters of a model's name to search the hub.", gr.update(), gr.update()
            return
        yield f"Searching the hub for {text.strip()!r}…", gr.update(), gr.update()
        try:
            listings = search_hub(text, SEARCH_LIMIT)
        except HearthError as exc:
            yield exc.for_page, gr.update(), gr.update()
            return
        if not listings:
            yield (
                f"No GGUF models on the hub match {text.strip()!r}; try fewer or other words.",
                gr.update(),
                gr.update(),
            )
            return
        self._rows = view.search_rows(listings)
        files = len(self._rows)
        repos = f"{len(listings)} repositor{'ies' if len(listings) != 1 else 'y'}"
        said = f"{files} file{'s' if files != 1 else ''} in {repos} match {text.strip()!r}."
        yield said, self.table(), gr.update(choices=view.hub_choices(self._rows), value=None)

    def install(self, choice: str | None) -> tuple[Any, ...]:
        """(line, install timer, Stop download): the download starts in the background; the timer follows it."""
        if not choice:
            return "Pick a file in the list first (search the hub for others).", gr.update(), gr.update()
        try:
            state = self.installs.start(choice)
        except HearthError as exc:
            return exc.for_page, gr.update(), gr.update()
        return (
            f"Installing {state.title}: asking the hub…",
            gr.update(active=True),
            cancel_button.ready("Stop download"),
        )
