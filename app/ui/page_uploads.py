"""Which files the page may take as uploads: only those its own upload route stored in this run.

A page handler that takes a file gets a path on this computer. Gradio fills it from what the browser sent, and a
client that speaks Gradio's queue can send any path instead of an upload (``{"path": "/home/me/.ssh/id_ed25519",
"meta": {"_type": "gradio.FileData"}}``); Gradio copies such a file into its cache before the handler runs when
the app was mounted rather than launched. So every handler checks the path against the set of files the upload
route wrote (Gradio keeps it per Blocks, for this run only) before it reads a byte.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from models.shared.errors import NotAnUpload


class PageUploads:
    def __init__(self, stored: Callable[[], Collection[str]]) -> None:
        """``stored``: the paths the page's upload route has written in this run (Gradio's
        ``Blocks.upload_file_set``), read at each check."""
        self._stored = stored

    def was_uploaded(self, path: str | os.PathLike[str]) -> bool:
        wanted = Path(path).resolve()
        return any(Path(stored).resolve() == wanted for stored in self._stored())

    def checked(self, paths: Sequence[str | os.PathLike[str]], remedy: str = "") -> list[Path]:
        """``paths`` as ``Path``s when every one was uploaded through the page in this run; else ``NotAnUpload``
        naming the first that was not (nothing is read)."""
        for path in paths:
            if not self.was_uploaded(path):
                raise NotAnUpload(
                    f"{Path(path).name or path!s} did not come from this page's upload box, so Hearth will not "
                    "read it.",
                    remedy
                    or "Drop the file into the upload box on the Documents tab (or the Models tab's import box) again.",
                )
        return [Path(path) for path in paths]
