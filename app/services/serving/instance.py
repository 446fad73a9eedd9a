"""The running Hearth, as other commands on this machine find it: ``hearth ui`` writes where it listens into the
data folder while it runs, and ``hearth use`` reads it to switch that Hearth's model instead of starting one."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from app.paths import write_private_text


@dataclass(frozen=True)
class ServerRecord:
    url: str  # the page's plain address
    api_url: str  # the OpenAI-compatible base URL
    pid: int
    entry_url: str = ""  # the page's address with this start's secret (the file is the owner's only)


def write_record(path: Path, record: ServerRecord) -> None:
    """Owner-only, whatever the umask: the record holds the page's secret."""
    write_private_text(path, json.dumps(asdict(record)))


def read_record(path: Path) -> ServerRecord | None:
    """The running Hearth, or None when none is (no file, a damaged one, or one left by a process that died)."""
    try:
        data = json.loads(path.read_text())
        record = ServerRecord(
            str(data["url"]), str(data["api_url"]), int(data["pid"]), str(data.get("entry_url") or data["url"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if process_alive(record.pid) else None


def remove_record(path: Path, pid: int) -> None:
    """Remove the record if it is this process's own (a second Hearth must not erase the first one's)."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        if int(json.loads(path.read_text())["pid"]) == pid:
            path.unlink()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
