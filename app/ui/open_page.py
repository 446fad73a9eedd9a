"""Opening the page in the owner's browser without putting its secret where other accounts can read it.

A browser started with the address on its command line shows the secret to every account on the computer
(``/proc/PID/cmdline`` is world-readable). So, as Jupyter does, the browser is given a small owner-only file in
the data folder instead, which sends it on to the address with the secret.
"""

from __future__ import annotations

import webbrowser
from html import escape
from pathlib import Path

from app.paths import write_private_text

REDIRECT_FILE = "open-page.html"

_REDIRECT = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={url}"><title>Opening Hearth…</title></head>
<body><p>Opening Hearth… If nothing happens, <a href="{url}">open it here</a>.</p></body>
</html>
"""


def write_redirect_file(folder: Path, entry_url: str) -> Path:
    """An owner-only HTML file in ``folder`` that sends a browser on to ``entry_url``."""
    path = folder / REDIRECT_FILE
    write_private_text(path, _REDIRECT.format(url=escape(entry_url, quote=True)))
    return path


def open_in_browser(folder: Path, entry_url: str) -> bool:
    """Open the page in the default browser through the redirect file; False when no browser could be started."""
    return webbrowser.open(write_redirect_file(folder, entry_url).as_uri())
