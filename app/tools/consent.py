"""Which tools the user allowed for good ("Always allow this tool"), per server and tool, kept owner-only in the
data folder as ``tool-consent.json``. Anything not listed here is asked about each time."""

from __future__ import annotations

import json
from pathlib import Path

from app.paths import write_private_text
from models.shared.errors import StorageError


class ConsentBook:
    def __init__(self, path: Path) -> None:
        self._path = path

    def allowed(self) -> set[tuple[str, str]]:
        try:
            raw = json.loads(self._path.read_text(encoding="utf-8"))
            return {(str(server), str(tool)) for server, tool in raw["always"]}
        except FileNotFoundError:
            return set()
        except (OSError, ValueError, KeyError, TypeError):
            return set()  # unreadable: nothing is allowed for good, so every call is asked about

    def is_allowed(self, server: str, tool: str) -> bool:
        return (server, tool) in self.allowed()

    def allow(self, server: str, tool: str) -> None:
        self._write(self.allowed() | {(server, tool)})

    def revoke(self, server: str, tool: str) -> None:
        self._write(self.allowed() - {(server, tool)})

    def _write(self, pairs: set[tuple[str, str]]) -> None:
        try:
            write_private_text(self._path, json.dumps({"always": sorted(pairs)}, indent=1))
        except OSError as exc:
            raise StorageError(f"{self._path} cannot be written ({exc.strerror}).", "Check the disk.") from None
