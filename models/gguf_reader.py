"""A bounded reader for GGUF headers.

GGUF files are untrusted input: a file from the internet can claim a billion keys, a string longer than the
file, a tensor with twenty dimensions, data past the end, or twelve million empty strings in one array. This
reader walks the header with every count and length checked against the bytes that are actually there and
against budgets far above any real model, and refuses the file with a clear reason before llama.cpp ever parses
it. It reads the header only, never the weights, and keeps little of it: arrays are counted and skipped, not
decoded (their items are read on demand, see :func:`read_strings`), and long strings are skipped too.

The ``gguf`` package supplies the type tables; its own reader parses every token of the vocabulary into numpy
arrays, which takes seconds and trusts the counts, so it is not used here.
"""

from __future__ import annotations

import mmap
import stat
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.shared.errors import ModelFileError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
MAX_DIMS = 4
MAX_ARRAY_NESTING = 2
DEFAULT_ALIGNMENT = 32
SMALLEST_FILE_BYTES = 24

# Budgets. Real models stay far below each (the largest vocabularies have about 262,144 tokens and about as many
# merges; headers have under a hundred keys); a file past one is refused with the reason. A header just inside all
# of them (four arrays of a million empty strings) takes about 2 s and 70 MB to read here, once: the catalog keeps
# the outcome.
MAX_METADATA_KEYS = 8192
MAX_KEY_BYTES = 1024
MAX_TENSORS = 65_536
MAX_TENSOR_NAME_BYTES = 63  # llama.cpp's own limit (GGML_MAX_NAME, with the terminating zero)
MAX_ARRAY_ITEMS = 1 << 20  # per array: 1,048,576
MAX_TOTAL_ARRAY_ITEMS = 1 << 22  # all arrays together: 4,194,304
MAX_METADATA_BYTES = 128 << 20  # the key/value section
# What is decoded and kept in memory; past these a value is skipped (counted, not decoded) instead.
KEPT_ARRAY_ITEMS = 1024  # numeric arrays this short are decoded (per-layer values); longer ones are skipped
MAX_KEPT_STRING_BYTES = 1 << 20  # one string value (chat templates are a few KB)
MAX_KEPT_BYTES = 16 << 20  # all decoded strings together
MAX_KEPT_ARRAY_ITEMS = 1 << 16  # all decoded array items together
MAX_TOKEN_BYTES = 4096  # one token read with read_strings (BOS, EOS)

_SCALARS: dict[int, tuple[str, int]] = {
    0: ("<B", 1),
    1: ("<b", 1),
    2: ("<H", 2),
    3: ("<h", 2),
    4: ("<I", 4),
    5: ("<i", 4),
    6: ("<f", 4),
    7: ("<?", 1),
    10: ("<Q", 8),
    11: ("<q", 8),
    12: ("<d", 8),
}
_STRING = 8
_ARRAY = 9
_U64 = struct.Struct("<Q")

_REMEDY = "Download the model again, or pick another GGUF file."
_NOT_GGUF_REMEDY = "Hearth runs GGUF models; convert the model with llama.cpp's convert_hf_to_gguf.py or pick a .gguf."


class ModelFileUnreadable(ModelFileError):
    """The path names no file Hearth can read: missing, a folder or device, or not permitted."""


class NotAModelFile(ModelFileError):
    """The file is readable but is not a GGUF file at all (too small, or no GGUF signature)."""


@dataclass(frozen=True)
class TensorEntry:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the start of the data section
    n_bytes: int


@dataclass(frozen=True)
class SkippedArray:
    """An array counted but not decoded: its item type, its length and where its first item starts."""

    item_type: int
    count: int
    offset: int

    @property
    def of_strings(self) -> bool:
        return self.item_type == _STRING

    def __len__(self) -> int:
        return self.count


@dataclass(frozen=True)
class SkippedString:
    """A string value too long to keep (Hearth needs none this long)."""

    n_bytes: int


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorEntry, ...]
    data_offset: int
    file_size_bytes: int


@dataclass
class _Budget:
    array_items: int = 0
    kept_bytes: int = 0
    kept_items: int = 0


class _Cursor:
    def __init__(self, buffer: mmap.mmap, path: Path) -> None:
        self.buf = buffer
        self.pos = 0
        self.size = len(buffer)
        self.path = path

    def fail(self, why: str) -> ModelFileError:
        return ModelFileError(f"{self.path.name} is not a valid GGUF file: {why}.", _REMEDY)

    def refuse(self, what: str, limit: str) -> ModelFileError:
        """A file past one of the reader's budgets: possibly valid, but no real model needs that much."""
        most = f" (Hearth reads at most {limit}; real models need far fewer)" if limit else ""
        return ModelFileError(
            f"{self.path.name} is refused: {what}{most}.",
            "This file is damaged or built to exhaust memory; download the model again from a source you trust.",
        )

    def need(self, n_bytes: int, what: str) -> None:
        if n_bytes < 0 or self.pos + n_bytes > self.size:
            raise self.fail(f"{what} runs past the end of the file (truncated or corrupt)")

    def scalar(self, value_type: int, what: str) -> Any:
        fmt, width = _SCALARS[value_type]
        self.need(width, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += width
        return value

    def u32(self, what: str) -> int:
        return int(self.scalar(4, what))

    def u64(self, what: str) -> int:
        return int(self.scalar(10, what))

    def string_span(self, what: str) -> tuple[int, int]:
        length = self.u64(f"length of {what}")
        self.need(length, what)
        start = self.pos
        self.pos += length
        return start, length

    def string(self, what: str, max_bytes: int) -> str:
        start, length = self.string_span(what)
        if length > max_bytes:
            raise self.fail(f"a {what} is {length} bytes long (at most {max_bytes} are allowed)")
        return self.decode(start, length, what)

    def decode(self, start: int, length: int, what: str) -> str:
        try:
            return bytes(self.buf[start : start + length]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{what} is not UTF-8") from exc

    def skip_strings(self, count: int, what: str) -> None:
        """Step over ``count`` strings, reading only their lengths (the hot loop for vocabularies)."""
        buf, pos, size, unpack = self.buf, self.pos, self.size, _U64.unpack_from
        for _ in range(count):
            if pos + 8 > size:
                break
            (length,) = unpack(buf, pos)
            pos += 8 + length
            if pos > size:
                break
        else:
            self.pos = pos
            return
        raise self.fail(f"{what} runs past the end of the file (truncated or corrupt)")


def read_header(path: Path) -> GGUFHeader:
    """Parse and bounds-check the header of the GGUF file at ``path``."""
    with _MappedFile(path) as cursor:
        return _parse(cursor)


def read_strings(path: Path, array: SkippedArray, indices: Iterable[int]) -> dict[int, str]:
    """The items at ``indices`` of a string array that :func:`read_header` skipped, read in one pass over the
    array's lengths (up to the highest index wanted). Indices outside the array are left out."""
    wanted = {index for index in indices if 0 <= index < array.count}
    if not wanted or not array.of_strings:
        return {}
    found: dict[int, str] = {}
    with _MappedFile(path) as cur:
        cur.pos = array.offset
        for index in range(max(wanted) + 1):
            start, length = cur.string_span(f"item {index} of a string array")
            if index in wanted:
                if length > MAX_TOKEN_BYTES:
                    raise cur.fail(f"token {index} is {length} bytes long (at most {MAX_TOKEN_BYTES} are allowed)")
                found[index] = bytes(cur.buf[start : start + length]).decode("utf-8", errors="replace")
    return found


def read_integers(path: Path, array: SkippedArray) -> list[int]:
    """The items of an integer array that :func:`read_header` skipped (a vocabulary's token types); an array of
    another type is refused."""
    if array.item_type not in _SCALARS or array.item_type in (6, 7, 12):
        raise ModelFileError(f"{path.name} is not a valid GGUF file: an array of integers holds other values.", _REMEDY)
    fmt, width = _SCALARS[array.item_type]
    with _MappedFile(path) as cur:
        cur.pos = array.offset
        cur.need(width * array.count, "an integer array")
        return [value for (value,) in struct.iter_unpack(fmt, cur.buf[cur.pos : cur.pos + width * array.count])]


class _MappedFile:
    """The file at ``path`` mapped read-only, with every way of not being a readable GGUF file told apart."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._handle: Any = None
        self._buffer: mmap.mmap | None = None

    def __enter__(self) -> _Cursor:
        path = self._path
        try:
            info = path.stat()
            if not stat.S_ISREG(info.st_mode):
                raise ModelFileUnreadable(
                    f"{path} is not a file.", "Point Hearth at a .gguf file, not a folder or device."
                )
            if info.st_size < SMALLEST_FILE_BYTES:
                raise NotAModelFile(
                    f"{path.name} is empty or far too small to be a GGUF model ({info.st_size} bytes).", _REMEDY
                )
            self._handle = path.open("rb")
            self._buffer = mmap.mmap(self._handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (FileNotFoundError, NotADirectoryError):
            self.__exit__()
            raise ModelFileUnreadable(
                f"Model file not found: {path}.", "Check the path, or unset it to use the embedded model."
            ) from None
        except PermissionError:
            self.__exit__()
            raise ModelFileUnreadable(
                f"Hearth is not allowed to read {path}.", "Check the file's permissions, or pick another file."
            ) from None
        except (OSError, ValueError) as exc:  # I/O errors; ValueError: mmap of a file that shrank to nothing
            self.__exit__()
            raise ModelFileUnreadable(
                f"Cannot read {path}: {getattr(exc, 'strerror', None) or exc}.", "Check the disk, or pick another file."
            ) from None
        return _Cursor(self._buffer, path)

    def __exit__(self, *_exc: object) -> None:
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _parse(cur: _Cursor) -> GGUFHeader:
    if bytes(cur.buf[:4]) != MAGIC:
        raise NotAModelFile(
            f"{cur.path.name} is not a GGUF file (it does not start with the GGUF signature).", _NOT_GGUF_REMEDY
        )
    cur.pos = 4
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        raise cur.fail(f"GGUF version {version} is not supported (expected 2 or 3)")
    tensor_count = cur.u64("tensor count")
    kv_count = cur.u64("metadata count")
    # The smallest key/value pair takes 13 bytes and the smallest tensor entry 24, so larger counts are lies.
    if kv_count * 13 > cur.size or tensor_count * 24 > cur.size:
        raise cur.fail(f"it claims {kv_count} metadata entries and {tensor_count} tensors, more than fit")
    if kv_count > MAX_METADATA_KEYS:
        raise cur.refuse(f"it has {kv_count:,} metadata entries", f"{MAX_METADATA_KEYS:,}")
    if tensor_count > MAX_TENSORS:
        raise cur.refuse(f"it has {tensor_count:,} tensors", f"{MAX_TENSORS:,}")

    budget = _Budget()
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = cur.string("metadata key", MAX_KEY_BYTES)
        if key in metadata:
            raise cur.fail(f"the metadata key {key} appears twice")
        value_type = cur.u32(f"type of {key}")
        metadata[key] = _read_value(cur, key, value_type, 0, budget)
        if cur.pos > MAX_METADATA_BYTES:
            raise cur.refuse(f"its metadata takes more than {MAX_METADATA_BYTES >> 20} MB", "")

    tensors = [_read_tensor_info(cur) for _ in range(tensor_count)]
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise cur.fail(f"general.alignment {alignment!r} is not a power of two")
    data_offset = -(-cur.pos // alignment) * alignment
    _check_tensor_layout(cur, tensors, data_offset, alignment)
    return GGUFHeader(version, metadata, tuple(tensors), data_offset, cur.size)


def _read_value(cur: _Cursor, key: str, value_type: int, depth: int, budget: _Budget) -> Any:
    if value_type in _SCALARS:
        return cur.scalar(value_type, key)
    if value_type == _STRING:
        start, length = cur.string_span(key)
        if length > MAX_KEPT_STRING_BYTES or budget.kept_bytes + length > MAX_KEPT_BYTES:
            return SkippedString(length)
        budget.kept_bytes += length
        return cur.decode(start, length, key)
    if value_type == _ARRAY:
        if depth >= MAX_ARRAY_NESTING:
            raise cur.fail(f"{key} nests arrays too deeply")
        item_type = cur.u32(f"item type of {key}")
        count = cur.u64(f"length of {key}")
        if count > MAX_ARRAY_ITEMS:
            raise cur.refuse(f"{key} has {count:,} items", f"{MAX_ARRAY_ITEMS:,} per array")
        budget.array_items += count
        if budget.array_items > MAX_TOTAL_ARRAY_ITEMS:
            raise cur.refuse(f"its arrays have more than {MAX_TOTAL_ARRAY_ITEMS:,} items", "")
        first_item = cur.pos
        if item_type in _SCALARS:
            width = _SCALARS[item_type][1]
            cur.need(count * width, key)
            if depth == 0 and count <= KEPT_ARRAY_ITEMS and budget.kept_items + count <= MAX_KEPT_ARRAY_ITEMS:
                budget.kept_items += count
                return [cur.scalar(item_type, key) for _ in range(count)]
            cur.pos += count * width
        elif item_type == _STRING:
            cur.need(count * 8, key)
            cur.skip_strings(count, key)
        elif item_type == _ARRAY:
            cur.need(count * 12, key)
            for _ in range(count):
                _read_value(cur, key, _ARRAY, depth + 1, budget)
        else:
            raise cur.fail(f"{key} has an unknown array item type {item_type}")
        return SkippedArray(item_type, count, first_item)
    raise cur.fail(f"{key} has an unknown value type {value_type}")


def _read_tensor_info(cur: _Cursor) -> TensorEntry:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    name = cur.string("tensor name", MAX_TENSOR_NAME_BYTES)
    n_dims = cur.u32(f"dimension count of {name}")
    if not 1 <= n_dims <= MAX_DIMS:
        raise cur.fail(f"tensor {name} has {n_dims} dimensions (at most {MAX_DIMS} are allowed)")
    shape = tuple(cur.u64(f"shape of {name}") for _ in range(n_dims))
    type_id = cur.u32(f"type of {name}")
    offset = cur.u64(f"offset of {name}")
    try:
        block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]
    except (ValueError, KeyError):
        raise cur.fail(f"tensor {name} has an unknown quantization type {type_id}") from None
    elements = 1
    for dim in shape:
        if dim == 0:
            raise cur.fail(f"tensor {name} has a zero-sized dimension")
        elements *= dim
    if elements % block_size:
        raise cur.fail(f"tensor {name} has {elements} elements, not a multiple of its block size {block_size}")
    n_bytes = elements // block_size * type_size
    if n_bytes > cur.size:
        raise cur.fail(f"tensor {name} claims {n_bytes} bytes, more than the whole file (truncated or corrupt)")
    return TensorEntry(name, shape, type_id, offset, n_bytes)


def _check_tensor_layout(cur: _Cursor, tensors: list[TensorEntry], data_offset: int, alignment: int) -> None:
    ordered = sorted(tensors, key=lambda t: t.offset)
    end_of_previous = 0
    previous = ""
    for tensor in ordered:
        if tensor.offset % alignment:
            raise cur.fail(f"tensor {tensor.name} is not aligned to {alignment} bytes")
        if tensor.offset < end_of_previous:
            raise cur.fail(f"tensors {previous} and {tensor.name} overlap")
        end = data_offset + tensor.offset + tensor.n_bytes
        if end > cur.size:
            raise cur.fail(
                f"tensor {tensor.name} ends at byte {end} but the file has {cur.size} bytes (truncated download?)"
            )
        end_of_previous = tensor.offset + tensor.n_bytes
        previous = tensor.name
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        raise cur.fail("two tensors share a name")


def metadata_getter(metadata: dict[str, Any], path: Path) -> Callable[..., Any]:
    """Typed access to metadata values, rejecting wrong types instead of passing them on."""

    def get(key: str, kind: type, default: Any = None) -> Any:
        value = metadata.get(key, default)
        if value is None or value is default:
            return value
        if kind is int and isinstance(value, bool):
            value = int(value)
        if isinstance(value, SkippedString):
            raise ModelFileError(
                f"{path.name} is refused: {key} is {value.n_bytes:,} bytes long, far more than a real model needs.",
                _REMEDY,
            )
        if not isinstance(value, kind):
            is_array = isinstance(value, SkippedArray | list)
            found = f"is an array of {len(value)} items" if is_array else f"has type {type(value).__name__}"
            raise ModelFileError(
                f"{path.name} is not a valid GGUF file: {key} {found}, expected {kind.__name__}.", _REMEDY
            )
        return value

    return get
