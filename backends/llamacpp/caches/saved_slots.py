"""Conversation caches kept on disk, so a follow-up after its slot was given to another conversation, or after
Hearth restarted, reads only what is new.

A saved cache is llama.cpp's state of one sequence (``llama_state_seq_get_data``: the keys and values of its
tokens) with the tokens themselves, in a file of its own::

    MAGIC | version | token count | state size | SHA-256 of the folder's key, the tokens and the state | tokens | state

A folder holds the caches of one model file (its path, size and modification time), context cache type, llama.cpp
build and adapter, so a cache is loaded only where it was computed. A file is checked whole (its size, its digest)
before llama.cpp reads it; one that fails is deleted and the prompt is read again. The caches of all models share
one cap on disk, the least recently used going first.

What another account can do with it: nothing. The folders are the owner's alone (0700) and each file is written
owner-only (0600) under a temporary name, then renamed, so no reader ever sees half a file; the caches hold the
conversations' text in another form and are as private as the conversations.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from backends.base import AdapterUse
from backends.llamacpp.caches.saved_slot_policy import Restore, Saved, covered, superseded, to_evict, to_restore

log = logging.getLogger(__name__)

MAGIC = b"HEARTHKV"
VERSION = 1
_HEAD = struct.Struct("<8sIIQ32s")  # magic, version, token count, state size, digest
SUFFIX = ".kv"
SOURCE = "model.json"  # in each folder: the model file its caches were computed with
TEMPORARY = ".saving-"
LEFTOVER_AGE_S = 600.0


def adapter_key(adapter: AdapterUse | None) -> str:
    return "" if adapter is None else f"{adapter.path}|{adapter.version}|{adapter.scale!r}"


def _digest(key: bytes, tokens: bytes, state: bytes) -> bytes:
    hasher = hashlib.sha256(key)
    hasher.update(tokens)
    hasher.update(state)
    return hasher.digest()


def encode(key: bytes, tokens: Sequence[int], state: bytes) -> tuple[bytes, bytes, bytes]:
    """A saved cache's file in its three parts, written one after another (a state is tens of megabytes: it is not
    copied into one buffer with the rest): the header, the tokens, the state."""
    packed = struct.pack(f"<{len(tokens)}I", *tokens)
    return _HEAD.pack(MAGIC, VERSION, len(tokens), len(state), _digest(key, packed, state)), packed, state


def read_tokens(path: Path) -> tuple[tuple[int, ...], int] | None:
    """The tokens a saved cache holds and its file's size, from its header; None for a file that is not one (or
    not whole)."""
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            head = file.read(_HEAD.size)
            if len(head) < _HEAD.size:
                return None
            magic, version, count, state_size, _ = _HEAD.unpack(head)
            if magic != MAGIC or version != VERSION or size != _HEAD.size + 4 * count + state_size:
                return None
            packed = file.read(4 * count)
    except OSError:
        return None
    if len(packed) != 4 * count:
        return None
    return struct.unpack(f"<{count}I", packed), size


def decode(key: bytes, data: bytes) -> tuple[tuple[int, ...], bytes] | None:
    """The tokens and the state of a whole file, or None when anything about it is wrong."""
    if len(data) < _HEAD.size:
        return None
    magic, version, count, state_size, digest = _HEAD.unpack_from(data)
    if magic != MAGIC or version != VERSION or len(data) != _HEAD.size + 4 * count + state_size:
        return None
    packed = data[_HEAD.size : _HEAD.size + 4 * count]
    state = data[_HEAD.size + 4 * count :]
    if _digest(key, packed, state) != digest:
        return None
    return struct.unpack(f"<{count}I", packed), state


class SavedSlots:
    """The saved caches under ``root`` for one loaded model (``model_key``), within ``cap_bytes`` for all models.
    Only the scheduler thread calls it."""

    def __init__(self, root: Path, model_key: str, cap_bytes: int, model_file: Path | None = None) -> None:
        """``model_file``: the GGUF the caches are computed with, named in each folder so that its caches go when
        it is removed or changed (they could never be loaded again)."""
        self.root = root
        self.cap_bytes = cap_bytes
        self._model_key = model_key
        self._model_file = model_file
        self._index: dict[str, tuple[int, list[Saved]]] = {}  # folder name -> (the folder's mtime, its caches)
        self._sweep()

    def _sweep(self) -> None:
        sweep(self.root)

    def _key(self, adapter: AdapterUse | None) -> bytes:
        return f"{self._model_key}\n{adapter_key(adapter)}".encode()

    def folder(self, adapter: AdapterUse | None) -> Path:
        return self.root / hashlib.sha256(self._key(adapter)).hexdigest()[:32]

    def entries(self, adapter: AdapterUse | None) -> list[Saved]:
        """The caches saved for this model and ``adapter``, read again only when the folder changed (another Hearth
        may share it)."""
        folder = self.folder(adapter)
        try:
            stamp = folder.stat().st_mtime_ns
        except OSError:
            return []
        known = self._index.get(folder.name)
        if known is not None and known[0] == stamp:
            return known[1]
        found: list[Saved] = []
        for path in folder.glob(f"*{SUFFIX}"):
            read = read_tokens(path)
            if read is None:
                continue
            with contextlib.suppress(OSError):
                found.append(Saved(path.name, read[0], read[1], path.stat().st_mtime))
        self._index[folder.name] = (stamp, found)
        return found

    def best(self, adapter: AdapterUse | None, prompt: Sequence[int], reused: int) -> Restore | None:
        return to_restore(self.entries(adapter), prompt, reused)

    def load(self, adapter: AdapterUse | None, saved: Saved) -> bytes | None:
        """The state of ``saved``, checked; a file that is gone or fails the check is deleted and None returned."""
        path = self.folder(adapter) / saved.name
        try:
            data = path.read_bytes()
        except OSError:
            self._drop(adapter, saved)
            return None
        decoded = decode(self._key(adapter), data)
        if decoded is None or decoded[0] != saved.tokens:
            log.warning("a saved conversation cache was damaged and is read again instead: %s", path.name)
            self._drop(adapter, saved)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # the most recently used now
        return decoded[1]

    def forget(self, adapter: AdapterUse | None, saved: Saved) -> None:
        """Delete a cache llama.cpp refused."""
        self._drop(adapter, saved)

    def covers(self, adapter: AdapterUse | None, tokens: Sequence[int]) -> bool:
        return covered(self.entries(adapter), tokens)

    def save(self, adapter: AdapterUse | None, tokens: Sequence[int], state: bytes, owner: str = "") -> None:
        """Keep ``state`` (the keys and values of ``tokens``), named for its ``owner`` (the conversation, so that
        :func:`forget_owner` finds it); the caches it holds whole are deleted, and the least recently used ones
        while all of them are over the cap. A failure to write (a full disk) is logged and costs only the saving."""
        if not state or len(state) + _HEAD.size > self.cap_bytes:
            return
        folder = self.folder(adapter)
        try:
            private_folder(self.root)
            private_folder(folder)
            if self._model_file is not None and not (folder / SOURCE).exists():
                write_private(folder / SOURCE, [source_of(self._model_file).encode()])
            digest = hashlib.sha256(struct.pack(f"<{len(tokens)}I", *tokens)).hexdigest()[:32]
            name = f"{owner_tag(owner)}-{digest}{SUFFIX}"
            write_private(folder / name, encode(self._key(adapter), tokens, state))
        except OSError as exc:
            log.warning("a conversation cache could not be saved (%s); it will be read again when needed", exc)
            return
        for older in superseded(self.entries(adapter), tokens):
            self._drop(adapter, older)
        self._evict()

    def _drop(self, adapter: AdapterUse | None, saved: Saved) -> None:
        with contextlib.suppress(OSError):
            (self.folder(adapter) / saved.name).unlink()
        self._index.pop(self.folder(adapter).name, None)

    def _evict(self) -> None:
        for folder in evict(self.root, self.cap_bytes):
            self._index.pop(folder, None)


def sweep(root: Path) -> None:
    """Delete what a write cut short left under ``root`` (an engine killed while saving): temporary files older
    than any write takes, so another engine's write in progress is left alone; and the folders of model files that
    were removed or changed since."""
    now = time.time()
    for path in root.glob(f"*/{TEMPORARY}*"):
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > LEFTOVER_AGE_S:
                path.unlink()
    for marker in root.glob(f"*/{SOURCE}"):
        if source_gone(marker):
            shutil.rmtree(marker.parent, ignore_errors=True)


def evict(root: Path, cap_bytes: int) -> list[str]:
    """Delete the least recently used cache files under ``root`` while all of them are over ``cap_bytes``; the
    folders (by name) whose files were deleted."""
    everything: list[Saved] = []
    for path in root.glob(f"*/*{SUFFIX}"):
        with contextlib.suppress(OSError):
            stat = path.stat()
            everything.append(Saved(f"{path.parent.name}/{path.name}", (), stat.st_size, stat.st_mtime))
    touched: list[str] = []
    for entry in to_evict(everything, cap_bytes):
        with contextlib.suppress(OSError):
            (root / entry.name).unlink()
        touched.append(entry.name.split("/", 1)[0])
    return touched


def owner_tag(owner: str) -> str:
    """How a saved cache's file name says whose it is, without the conversation's id itself."""
    return hashlib.sha256(owner.encode()).hexdigest()[:16] if owner else "anyone"


def forget_owner(root: Path, owner: str) -> int:
    """Delete the caches saved from ``owner``'s answers, for every model; how many there were. (A cache another
    conversation loaded since is saved again under that one's name, with only the text the two share.)"""
    deleted = 0
    for path in root.glob(f"*/{owner_tag(owner)}-*{SUFFIX}"):
        with contextlib.suppress(OSError):
            path.unlink()
            deleted += 1
    return deleted


def source_of(model_file: Path) -> str:
    stat = model_file.stat()
    return json.dumps({"path": str(model_file.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})


def source_gone(marker: Path) -> bool:
    """Whether the model file a folder's caches were computed with is no longer there as it was."""
    try:
        source = json.loads(marker.read_text())
        path, size, mtime_ns = Path(source["path"]), int(source["size"]), int(source["mtime_ns"])
    except (OSError, ValueError, KeyError, TypeError):
        return False  # not one to judge: the cap takes its caches in time
    try:
        stat = path.stat()
    except OSError:
        return True
    return (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns)


def private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_mode & 0o077:
        folder.chmod(0o700)


def write_private(path: Path, parts: Sequence[bytes]) -> None:
    """``parts`` one after another as ``path``, owner-only, appearing whole or not at all."""
    descriptor, temporary = tempfile.mkstemp(prefix=TEMPORARY, dir=path.parent)  # mkstemp makes it 0600
    try:
        with os.fdopen(descriptor, "wb") as file:
            for part in parts:
                file.write(part)
        Path(temporary).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(temporary).unlink()
        raise
