"""Kept passage caches on disk, so a passage read once is joined after a restart too.

Each kept passage is a file of the saved-caches format (``saved_slots``): the passage's tokens and
what ``PassageStore`` keeps of it, the position it was computed at and llama.cpp's state of its cells, under a digest
of the model file, the context cache type, the llama.cpp build and the adapter. A folder holds one model's and one
adapter's passages, so a cache is found only where it was computed: another model or adapter looks in another
folder, and a passage of a changed file has other tokens, so another name (its old cache is no longer used and is
the first to go under the cap). Folders of model files removed or changed since are deleted at start.

A file is checked whole (size, digest, the very tokens asked for) before llama.cpp sees its state; one that fails is
deleted and the passage is read again. Written owner-only under a temporary name and then renamed (no reader sees
half a file); the folders are the owner's alone: the caches hold the documents' text in another form.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
from collections.abc import Sequence
from pathlib import Path

from backends.base import AdapterUse
from backends.llamacpp.caches.passage_store import KeptPassage
from backends.llamacpp.caches.saved_slots import (
    SOURCE,
    SUFFIX,
    adapter_key,
    decode,
    encode,
    evict,
    private_folder,
    source_of,
    sweep,
    write_private,
)

log = logging.getLogger(__name__)

_AT = struct.Struct("<I")  # the position the passage was computed at, in front of the state


class PassageShelf:
    """The passage caches under ``root`` for one loaded model (``model_key``), within ``cap_bytes`` for all models.
    Only the scheduler thread calls it."""

    def __init__(self, root: Path, model_key: str, cap_bytes: int, model_file: Path | None = None) -> None:
        self.root = root
        self.cap_bytes = cap_bytes
        self._model_key = model_key
        self._model_file = model_file
        sweep(root)

    def _key(self, adapter: AdapterUse | None) -> bytes:
        return f"{self._model_key}\n{adapter_key(adapter)}".encode()

    def _path(self, adapter: AdapterUse | None, tokens: Sequence[int]) -> Path:
        folder = hashlib.sha256(self._key(adapter)).hexdigest()[:32]
        name = hashlib.sha256(struct.pack(f"<{len(tokens)}I", *tokens)).hexdigest()[:32]
        return self.root / folder / f"{name}{SUFFIX}"

    def has(self, adapter: AdapterUse | None, tokens: Sequence[int]) -> bool:
        return self._path(adapter, tokens).is_file()

    def get(self, adapter: AdapterUse | None, tokens: Sequence[int]) -> KeptPassage | None:
        """The kept cache of exactly these tokens under ``adapter``, checked (now the most recently used); None when
        there is none, or the file fails the check (it is deleted)."""
        path = self._path(adapter, tokens)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        decoded = decode(self._key(adapter), data)
        if decoded is None or decoded[0] != tuple(tokens) or len(decoded[1]) <= _AT.size:
            log.warning("a kept passage cache was damaged and the passage is read again instead: %s", path.name)
            self.drop(adapter, tokens)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        (computed_at,) = _AT.unpack_from(decoded[1])
        return KeptPassage(decoded[1][_AT.size :], computed_at)

    def put(self, adapter: AdapterUse | None, tokens: Sequence[int], kept: KeptPassage) -> None:
        """Keep a passage's cache on disk, then delete the least recently used while all of them are over the cap.
        A failure to write (a full disk) is logged and costs only the keeping."""
        if not kept.state or len(kept.state) > self.cap_bytes:
            return
        path = self._path(adapter, tokens)
        try:
            private_folder(self.root)
            private_folder(path.parent)
            if self._model_file is not None and not (path.parent / SOURCE).exists():
                write_private(path.parent / SOURCE, [source_of(self._model_file).encode()])
            write_private(path, encode(self._key(adapter), tokens, _AT.pack(kept.computed_at) + kept.state))
        except OSError as exc:
            log.warning("a passage cache could not be kept on disk (%s); it stays in memory only", exc)
            return
        evict(self.root, self.cap_bytes)

    def drop(self, adapter: AdapterUse | None, tokens: Sequence[int]) -> None:
        with contextlib.suppress(OSError):
            self._path(adapter, tokens).unlink()
