"""The MCP servers the user added (``hearth mcp``), kept in the data folder as ``mcp-servers.json``, owner-only.

A server is started by a command (stdio: command, arguments, extra environment) or reached at a URL (Streamable
HTTP, with an optional bearer token read from a file when it is added). The token is a secret: it is kept in the
owner-only file and nowhere else, never printed, and :class:`ServerEntry`'s ``repr`` leaves it out. The file is
rewritten whole under a temporary name, so a reader never sees half of it; a file that cannot be read is reported
with its remedy and left as it is.

Pure policy (names, import, validation) apart from :class:`ServerBook`'s reading and writing.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from app.paths import write_private_text
from models.shared.errors import HearthError, InvalidChoice, StorageError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
MAX_SERVERS = 64
MAX_TOKEN_CHARS = 8_192


@dataclass(frozen=True)
class ServerEntry:
    name: str
    kind: Literal["stdio", "http"]
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # extra variables, over the safe default environment
    url: str = ""
    token: str = field(default="", repr=False)  # bearer token for the URL; a secret
    enabled: bool = True

    @property
    def where(self) -> str:
        """How the server is reached, as the user may see it (never the token)."""
        if self.kind == "http":
            return shown_url(self.url) + (" (with a token)" if self.token else "")
        return shlex.join([self.command, *self.args])

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.name, "kind": self.kind, "enabled": self.enabled}
        if self.kind == "http":
            body |= {"url": self.url, "token": self.token}
        else:
            body |= {"command": self.command, "args": list(self.args), "env": dict(self.env)}
        return body


def stdio_entry(name: str, command: list[str], env: Mapping[str, str] | None = None) -> ServerEntry:
    _check_name(name)
    if not command or not command[0].strip():
        raise InvalidChoice(
            "An MCP server needs the command that starts it.",
            f"hearth mcp add {name} -- COMMAND [ARG...]",
            page_remedy="Type it in the box beside the name (Command that starts it, or its address).",
        )
    return ServerEntry(name, "stdio", command[0], tuple(command[1:]), tuple(sorted((env or {}).items())))


def http_entry(name: str, url: str, token: str = "", stored: bool = False) -> ServerEntry:
    """A server reached at ``url``. A new address may not carry a user name, a password or a query (secrets
    there would be shown wherever the address is: lists, logs, the page); one ``stored`` before that rule is read
    as it is, and shown without them."""
    _check_name(name)
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError:
        hostname = None
    if not hostname or parts.scheme not in ("http", "https"):
        raise InvalidChoice(
            f"{shown_url(url)!r} is not an http:// or https:// address of an MCP server.",
            "Give the server's Streamable HTTP endpoint, for example http://127.0.0.1:8000/mcp.",
        )
    if not stored and (parts.username is not None or parts.password is not None or parts.query or parts.fragment):
        raise InvalidChoice(
            f"The address {shown_url(url)} carries a user name, a password or a query; Hearth does not keep "
            "secrets in an address, where lists and logs would show them.",
            "Give the address without them, and the server's bearer token with --token-file.",
            page_remedy="Give the address without them, and the server's token in its token box.",
        )
    if len(token) > MAX_TOKEN_CHARS or any(c in token for c in "\r\n\0"):
        raise InvalidChoice("The token is not one line of text.", "Put only the token in the token file.")
    return ServerEntry(name, "http", url=url, token=token)


def shown_url(url: str) -> str:
    """``url`` as it may be shown: without a user name, a password, a query or a fragment."""
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "(an address that cannot be read)"
    return f"{parts.scheme}://{host}{parts.path}" if parts.scheme else url.split("?", 1)[0].rpartition("@")[2]


def read_token_file(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidChoice(
            f"The token file {path} cannot be read ({exc}).", "Name a file that holds the token."
        ) from None
    token = text.strip()
    if not token:
        raise InvalidChoice(f"The token file {path} is empty.", "Put the server's bearer token in it.")
    return token


def imported_entries(text: str) -> list[ServerEntry]:
    """The servers of an ``mcpServers`` file, as Claude Desktop, Cursor, LM Studio and others write it."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InvalidChoice(f"The file is not JSON ({exc}).", 'Give a file with {"mcpServers": {...}}.') from None
    except RecursionError:
        raise InvalidChoice(
            "The file is not JSON that Hearth reads (it nests too deep).", 'Give a file with {"mcpServers": {...}}.'
        ) from None
    servers = raw.get("mcpServers") if isinstance(raw, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise InvalidChoice("The file has no mcpServers object.", 'Give a file with {"mcpServers": {NAME: {...}}}.')
    entries = []
    for name, spec in servers.items():
        if not isinstance(spec, dict):
            raise InvalidChoice(f"The server {name!r} is not an object.", "Fix the file and import it again.")
        if isinstance(spec.get("url"), str):
            given = spec.get("headers")
            headers: dict[str, Any] = given if isinstance(given, dict) else {}
            bearer = str(headers.get("Authorization", headers.get("authorization", "")))
            entries.append(http_entry(name, spec["url"], bearer.removeprefix("Bearer ").strip()))
            continue
        command, args, env = spec.get("command"), spec.get("args", []), spec.get("env", {})
        if not isinstance(command, str) or not isinstance(args, list) or not isinstance(env, dict):
            raise InvalidChoice(
                f"The server {name!r} has no command (with a list of args) or url.", "Fix the file and import it again."
            )
        entry = stdio_entry(name, [command, *map(str, args)], {str(k): str(v) for k, v in env.items()})
        entries.append(replace(entry, enabled=not spec.get("disabled", False)))
    return entries


def _check_name(name: str) -> None:
    if not NAME.match(name):
        raise InvalidChoice(
            f"{name!r} cannot name an MCP server.",
            "Use up to 40 letters, digits, '.', '_' or '-', starting with a letter or digit.",
        )


def _entry(raw: Any) -> ServerEntry:
    if not isinstance(raw, dict) or raw.get("kind") not in ("stdio", "http"):
        raise ValueError("an entry is not a server")
    enabled = bool(raw.get("enabled", True))
    if raw["kind"] == "http":
        entry = http_entry(str(raw["name"]), str(raw["url"]), str(raw.get("token", "")), stored=True)
        return replace(entry, enabled=enabled)
    entry = stdio_entry(str(raw["name"]), [str(raw["command"]), *map(str, raw.get("args", []))], raw.get("env") or {})
    return replace(entry, enabled=enabled)


class ServerBook:
    """The MCP servers kept in ``path``."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def entries(self) -> list[ServerEntry]:
        try:
            text = self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(
                f"{self._path} cannot be read ({exc.strerror}).", "Check the data folder's permissions."
            ) from None
        try:
            return [_entry(raw) for raw in json.loads(text)["servers"]]
        except (ValueError, KeyError, TypeError, HearthError) as exc:
            raise StorageError(
                f"{self._path} is damaged ({exc}); Hearth left it as it is.",
                f"Fix or remove {self._path.name}, then add the servers again (hearth mcp add or import).",
                page_remedy=f"Fix or remove {self._path.name}, then add the servers again in the Tools tab.",
            ) from None

    def get(self, name: str) -> ServerEntry:
        return _named(self.entries(), name)

    def add(self, entry: ServerEntry, replace_existing: bool = False) -> ServerEntry:
        self.add_all([entry], replace_existing)
        return entry

    def add_all(self, added: Sequence[ServerEntry], replace_existing: bool = False) -> None:
        """Add every one of ``added`` or none: each is checked (a name taken, twice in ``added``, too many) before
        the file is written, once."""
        entries = self.entries()
        names: set[str] = set()
        for entry in added:
            key = entry.name.casefold()
            if key in names:
                raise InvalidChoice(f"The MCP server {entry.name!r} is given twice.", "Give each server once.")
            names.add(key)
            if not replace_existing and any(e.name.casefold() == key for e in entries):
                raise InvalidChoice(
                    f"An MCP server called {entry.name!r} is already added; nothing was added.",
                    f"Remove it first (hearth mcp remove {entry.name}), or pick another name.",
                    page_remedy="Remove it first (pick it under Server, press Remove), or pick another name.",
                )
        kept = [e for e in entries if e.name.casefold() not in names]
        if len(kept) + len(added) > MAX_SERVERS:
            raise InvalidChoice(
                f"At most {MAX_SERVERS} MCP servers can be added; nothing was added.", "Remove one you no longer use."
            )
        self._write([*kept, *added])

    def remove(self, name: str) -> ServerEntry:
        entries = self.entries()
        gone = _named(entries, name)
        self._write([e for e in entries if e != gone])
        return gone

    def set_enabled(self, name: str, enabled: bool) -> ServerEntry:
        entries = self.entries()
        entry = _named(entries, name)
        changed = replace(entry, enabled=enabled)
        self._write([changed if e == entry else e for e in entries])
        return changed

    def _write(self, entries: list[ServerEntry]) -> None:
        try:
            write_private_text(self._path, json.dumps({"servers": [e.to_json() for e in entries]}, indent=1))
        except OSError as exc:
            raise StorageError(
                f"{self._path} cannot be written ({exc.strerror}).", "Check the disk and the data folder."
            ) from None


def _named(entries: Sequence[ServerEntry], name: str) -> ServerEntry:
    for entry in entries:
        if entry.name.casefold() == name.casefold():
            return entry
    known = ", ".join(e.name for e in entries) or "none yet"
    raise InvalidChoice(
        f"There is no MCP server called {name!r} (added: {known}).",
        "See hearth mcp list.",
        page_remedy="Pick one of those under Server.",
    )
