"""Where Hearth keeps its data: ``HEARTH_HOME`` if set, else the platform's user data directory."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from models.shared.errors import StorageError
from models.shared.private_files import PRIVATE_FILE_MODE, tighten

log = logging.getLogger(__name__)

# The data folder holds conversations, document copies and the API key: only its owner may read it.
PRIVATE_DIR_MODE = 0o700
PRIVATE_UMASK = 0o077
# What Hearth keeps in the data folder (besides the folders below): each database with SQLite's side files.
_DATABASE_NAMES = ("conversations.db", "index.db", "models.db")
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")


@dataclass(frozen=True)
class DataPaths:
    root: Path

    @property
    def conversations_db(self) -> Path:
        return self.root / "conversations.db"

    @property
    def logs_dir(self) -> Path:
        """What libraries say (llama.cpp's warnings and errors), kept off the terminal unless ``-v`` is given."""
        return self.root / "logs"

    @property
    def index_db(self) -> Path:
        return self.root / "index.db"

    @property
    def vectors_dir(self) -> Path:
        return self.root / "vectors"

    @property
    def uploads_dir(self) -> Path:
        """Copies of files added through the web page, a folder per collection (Hearth owns these copies)."""
        return self.root / "documents"

    @property
    def page_key(self) -> Path:
        """The key the page's browser storage is sealed with, kept so the open conversation survives a restart."""
        return self.root / "page.key"

    @property
    def page_files_dir(self) -> Path:
        """Gradio's temporary files (the browser's uploads before Hearth keeps a copy), a folder per running
        Hearth, instead of the shared system temp folder."""
        return self.root / "page-files"

    @property
    def api_files_dir(self) -> Path:
        """Files sent with an API request, each only while it is read."""
        return self.root / "cache" / "api-files"

    @property
    def ladders_dir(self) -> Path:
        """The quality-vs-speed charts the Models tab draws."""
        return self.root / "ladders"

    @property
    def models_db(self) -> Path:
        return self.root / "models.db"

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def adapters_dir(self) -> Path:
        """LoRA adapters trained here (``models.adapters``)."""
        return self.root / "adapters"

    @property
    def tuning_dir(self) -> Path:
        """One folder per tuning run: its data, events and checkpoints (``models.tuning.runs``)."""
        return self.root / "tuning"

    @property
    def conversation_cache_dir(self) -> Path:
        """Conversations' llama.cpp caches, one folder per model (``backends.llamacpp.caches.saved_slots``;
        owner-only)."""
        return self.root / "cache" / "conversations"

    @property
    def passage_cache_dir(self) -> Path:
        """Kept passages' llama.cpp caches, one folder per model and adapter
        (``backends.llamacpp.caches.passage_shelf``; owner-only)."""
        return self.root / "cache" / "passages"

    @property
    def compiled_cache_dir(self) -> Path:
        """Models compiled for a device (OpenVINO), so the second load skips compilation."""
        return self.root / "cache" / "compiled"

    @property
    def api_key_file(self) -> Path:
        """The local API's key (owner-only permissions; `hearth api-key` shows it, `--rotate` replaces it)."""
        return self.root / "api-key"

    @property
    def workers_file(self) -> Path:
        """The workers this Hearth has paired with (``hearth workers``), with their tokens: owner-only."""
        return self.root / "workers.json"

    @property
    def mcp_servers_file(self) -> Path:
        """The MCP servers the user added (``hearth mcp``), with their tokens: owner-only."""
        return self.root / "mcp-servers.json"

    @property
    def tool_consent_file(self) -> Path:
        """The tools the user allowed for good ("always"), per server and tool."""
        return self.root / "tool-consent.json"

    @property
    def chroma_servers_dir(self) -> Path:
        """The mirror of each Chroma server's ledger (rag/server_ledger.py: its collections and their files' records,
        one database per server), for listing them while the server cannot be reached (owner-only)."""
        return self.root / "chroma-servers"

    @property
    def chroma_server_file(self) -> Path:
        """The Chroma server chosen on the page (its address, and the names of its token and CA files): owner-only."""
        return self.root / "chroma-server.json"

    @property
    def server_file(self) -> Path:
        """Where a running `hearth ui` says where it listens, so other commands can talk to it."""
        return self.root / "server.json"

    def hearths_own(self) -> list[Path]:
        """Everything Hearth writes in the data folder (the folder itself may hold other things of the user's)."""
        databases = [self.root / f"{name}{side}" for name in _DATABASE_NAMES for side in _SQLITE_SIDE_FILES]
        folders = [self.vectors_dir, self.uploads_dir, self.models_dir, self.root / "cache", self.logs_dir]
        return [
            *databases,
            *folders,
            self.ladders_dir,
            self.adapters_dir,
            self.tuning_dir,
            self.page_files_dir,
            self.api_key_file,
            self.server_file,
            self.workers_file,
            self.mcp_servers_file,
            self.tool_consent_file,
            self.chroma_servers_dir,
            self.chroma_server_file,
            self.root / "worker-paired.json",
        ]


def resolve_data_paths(home: Path | None) -> DataPaths:
    if home is None:
        from platformdirs import user_data_dir

        home = Path(user_data_dir("hearth", appauthor=False))
    return DataPaths(Path(home).expanduser().resolve())


def ensure_data_dir(paths: DataPaths) -> DataPaths:
    """Create the data folder owner-only, and make private a folder left readable by an older Hearth."""
    try:
        paths.root.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    except OSError as exc:
        raise StorageError(
            f"Cannot create the data directory {paths.root}: {exc.strerror}.",
            "Set HEARTH_HOME to a folder you can write to.",
        ) from exc
    refuse_foreign_owner(paths.root)
    make_private(paths)
    return paths


def refuse_foreign_owner(root: Path) -> None:
    """Refuse a data folder another account owns: its owner could read the conversations and the API key, or put
    its own files (a model, a database) where Hearth would use them. Root is no exception: a folder made by another
    account (under /tmp, say) stays that account's, whatever root's chmod does to it."""
    if os.name == "nt":
        return
    try:
        owner = root.stat().st_uid
    except OSError as exc:
        raise StorageError(
            f"Cannot open the data directory {root}: {exc.strerror}.", "Set HEARTH_HOME to a folder you can write to."
        ) from exc
    if owner != os.geteuid():
        raise StorageError(
            f"The data folder {root} belongs to another account ({_account_name(owner)}), which could read or "
            "change what Hearth keeps there; Hearth did not use it.",
            "Set HEARTH_HOME to a folder of your own, or leave it unset for the default.",
        )


def _account_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"user id {uid}"


def keep_new_files_private() -> None:
    """From now on, every file and folder this process creates, and those of the processes it starts (the engine,
    the quantizer), SQLite's and Chroma's included, is its owner's only. Set once, where the command line starts."""
    os.umask(PRIVATE_UMASK)


def make_private(paths: DataPaths) -> None:
    """Make the data folder 0700; if it was open to others (made by an earlier Hearth, or copied), also take
    the group's and others' permissions off everything Hearth keeps in it. Best effort: a folder this user does
    not own stays as it is, with a warning in the log."""
    if os.name == "nt":  # permissions there are ACLs that the user profile already restricts
        return
    try:
        if not stat.S_IMODE(paths.root.stat().st_mode) & 0o077:
            return
        paths.root.chmod(PRIVATE_DIR_MODE)
    except OSError as exc:
        log.warning("could not make the data folder %s private: %s", paths.root, exc.strerror or exc)
        return
    for entry in paths.hearths_own():
        _tighten_tree(entry)


def write_private_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, owner-only whatever the umask (a file left with looser permissions is
    replaced, not reused), written under a temporary name so a reader never sees half of it."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    temporary.chmod(PRIVATE_FILE_MODE)  # O_CREAT's mode does not apply to a temporary left by a killed run
    temporary.replace(path)


def _tighten_tree(top: Path) -> None:
    tighten(top)
    if not top.is_dir() or top.is_symlink():
        return
    for folder, dirs, files in os.walk(top):  # symbolic links are not followed
        for name in [*dirs, *files]:
            tighten(Path(folder) / name)
