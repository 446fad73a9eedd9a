"""The secret Gradio seals the page's browser storage with (the open conversation, a new chat's collection).

Gradio makes a new one at every start when none is given, so after a restart every browser's remembered state
fails to open and the page starts blank. Hearth keeps one in the data folder instead. It guards nothing secret
(the state only names a conversation on this machine), so a missing, empty or unreadable file is replaced.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

from app.paths import write_private_text

log = logging.getLogger(__name__)

MIN_LENGTH = 32


def page_key(path: Path) -> str:
    """The key kept at ``path``, made (owner-only) on first use."""
    try:
        key = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        key = ""
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("the page key %s could not be read (%s): making a new one; open pages start blank", path, exc)
        key = ""
    if len(key) >= MIN_LENGTH:
        return key
    key = secrets.token_urlsafe(32)
    write_private_text(path, key)
    return key
