"""Where Hearth keeps its data: ``HEARTH_HOME`` if set, else the platform's user data directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.errors import StorageError


@dataclass(frozen=True)
class DataPaths:
    root: Path

    @property
    def conversations_db(self) -> Path:
        return self.root / "conversations.db"

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
    def models_db(self) -> Path:
        return self.root / "models.db"

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def compiled_cache_dir(self) -> Path:
        """Models compiled for a device (OpenVINO), so the second load skips compilation."""
        return self.root / "cache" / "compiled"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def api_key_file(self) -> Path:
        """The local API's key (owner-only permissions; `hearth api-key` shows it, `--rotate` replaces it)."""
        return self.root / "api-key"

    @property
    def server_file(self) -> Path:
        """Where a running `hearth ui` says where it listens, so other commands can talk to it."""
        return self.root / "server.json"


def resolve_data_paths(home: Path | None) -> DataPaths:
    if home is None:
        from platformdirs import user_data_dir

        home = Path(user_data_dir("hearth", appauthor=False))
    return DataPaths(Path(home).expanduser().resolve())


def ensure_data_dir(paths: DataPaths) -> DataPaths:
    try:
        paths.root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"Cannot create the data directory {paths.root}: {exc.strerror}.",
            "Set HEARTH_HOME to a folder you can write to.",
        ) from exc
    return paths
