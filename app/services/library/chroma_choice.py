"""The Chroma server chosen on the page: kept in the data folder, used when no setting names one.

``HEARTH_RAG__CHROMA_URL`` (with its token and CA file settings) wins: it is what an administrator or a service unit
set, and the page then shows it without offering to change it. Otherwise the page's choice, kept in
``chroma-server.json`` (owner-only: it names the token's file), is used from then on and after a restart. The choice
is checked before it is kept (the address, the token file's permissions, the CA file, and that the server answers),
so a kept choice is one that worked when it was made.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from app.paths import write_private_text
from app.settings import Settings
from rag.chroma_server import (
    ChromaServer,
    ChromaServerSettingError,
    ChromaServerUnreachable,
    chroma_server,
    on_this_computer,
    server_client,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerChoice:
    """A Chroma server to keep new collections on, and where it was chosen."""

    url: str
    token_file: Path | None = None
    ca_file: Path | None = None
    source: str = "page"  # "page" (chroma-server.json) or "settings" (HEARTH_RAG__CHROMA_URL)

    def server(self) -> ChromaServer:
        """The server, its address and files checked (``ChromaServerSettingError`` says what is wrong)."""
        return chroma_server(self.url, self.token_file, self.ca_file)


class ServerChoiceFile:
    """``chroma-server.json``: the server the page chose, or nothing."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> ServerChoice | None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            url = str(raw["url"])
            token, ca = raw.get("token_file"), raw.get("ca_file")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:  # damaged: as if none were chosen, and said so
            log.warning("the page's Chroma server choice %s is unreadable (%s): using the data folder", self.path, exc)
            return None
        return ServerChoice(url, Path(token) if token else None, Path(ca) if ca else None)

    def save(self, choice: ServerChoice) -> None:
        body = {
            "url": choice.url,
            "token_file": str(choice.token_file) if choice.token_file else None,
            "ca_file": str(choice.ca_file) if choice.ca_file else None,
        }
        write_private_text(self.path, json.dumps(body, indent=1) + "\n")

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def unencrypted(choice: ServerChoice) -> bool:
    """Whether what is sent to the server crosses a network in the clear (http:// to another computer)."""
    server = urlsplit(choice.url.strip())
    return server.scheme.lower() == "http" and not on_this_computer(server.hostname or "")


def _among(path: Path, owned: Sequence[Path]) -> bool:
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return False
    for own in owned:
        try:
            kept = own.resolve()
        except (OSError, RuntimeError):
            continue
        if real == kept or kept in real.parents:
            return True
    return False


def current_choice(settings: Settings, path: Path) -> ServerChoice | None:
    """The server new collections go to: the settings' if they name one, else the page's, else None."""
    rag = settings.rag
    if rag.chroma_url is not None:
        return ServerChoice(rag.chroma_url, rag.chroma_token_file, rag.chroma_ca_file, source="settings")
    return ServerChoiceFile(path).load()


def choose(
    path: Path,
    url: str,
    token_file: str = "",
    ca_file: str = "",
    hearths_own: Sequence[Path] = (),
    token_folder: Path | None = None,
) -> ServerChoice:
    """Check the page's choice (address, files, and that the server answers), then keep it. Raises the typed error
    naming what is wrong (``ChromaServerSettingError``, ``ChromaServerUnreachable``); nothing is kept then.

    The token file is sent to the server as a bearer token, so the page may name only one inside ``token_folder``
    (the data folder) and never one among ``hearths_own`` (Hearth's own files there: the API key, the workers'
    tokens): a file elsewhere that happens to hold one line (another program's key) is not the server's to see. A
    token file anywhere else is the owner's to set where Hearth starts (``rag.chroma_token_file``)."""
    choice = ServerChoice(
        url.strip(),
        Path(token_file.strip()).expanduser() if token_file.strip() else None,
        Path(ca_file.strip()).expanduser() if ca_file.strip() else None,
    )
    if choice.token_file is not None and _among(choice.token_file, hearths_own):
        raise ChromaServerSettingError(
            f"{choice.token_file} is one of Hearth's own files; what it holds is not a Chroma server's token.",
            "Put the server's token in a file of its own (chmod 600) and name that one.",
            page_remedy="Put the server's token in a file of its own (only you may read it) and name that one.",
        )
    if choice.token_file is not None and token_folder is not None and not _among(choice.token_file, [token_folder]):
        raise ChromaServerSettingError(
            f"{choice.token_file} is outside Hearth's data folder; the page sends a server only a token kept there.",
            f"Copy the server's token into a file of its own in {token_folder} (chmod 600) and name that one, or "
            "set rag.chroma_token_file where Hearth starts.",
            page_remedy=f"Copy the server's token into a file of its own in {token_folder} (only you may read it) "
            "and name that one.",
        )
    try:
        server_client(choice.server())  # asks the server's heartbeat, with the timeout
    except ChromaServerUnreachable as exc:  # said for connecting, not for a server that was in use
        raise ChromaServerUnreachable(
            exc.message,
            f"{exc.remedy} Nothing was changed: new collections go where they went before.",
            page_remedy="Check the address (and the token and certificate files, if a proxy stands in front of the "
            "server) and that the Chroma server runs there. Nothing was changed: new collections go where they "
            "went before.",
        ) from exc
    ServerChoiceFile(path).save(choice)
    return choice
