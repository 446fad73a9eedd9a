"""The owner-only file a browser is opened with (app.ui.open_page): never a URL with the secret on a command line."""

from __future__ import annotations

import os
from pathlib import Path

from app.ui.open_page import write_redirect_file


def test_the_redirect_file_is_the_owners_only_and_sends_the_browser_on(tmp_path: Path) -> None:
    entry = "http://127.0.0.1:7860/?token=abc&x=<1>"
    old = os.umask(0o022)
    try:
        (tmp_path / "open-page.html").write_text("left by a Hearth started with a looser umask")
        (tmp_path / "open-page.html").chmod(0o644)
        path = write_redirect_file(tmp_path, entry)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o600
    html = path.read_text()
    assert 'content="0;url=http://127.0.0.1:7860/?token=abc&amp;x=&lt;1&gt;"' in html
    assert "<1>" not in html
    assert [p.name for p in tmp_path.iterdir()] == ["open-page.html"]  # no temporary file left behind
