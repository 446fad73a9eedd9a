"""A bounded reader for GGUF headers.

GGUF files are untrusted input: a file from the internet can claim a billion keys, a string longer than the
file, a tensor with twenty dimensions or data past the end. This reader walks the header with every count and
length checked against the bytes that are actually there, and refuses the file with a clear reason before
llama.cpp ever parses it. It reads the header only (a few MB at most), never the weights.

The ``gguf`` package supplies the type tables; its own reader parses every token of the vocabulary into numpy
arrays, which takes seconds and trusts the counts, so it is not used here.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import ModelFileError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
MAX_DIMS = 4
MAX_ARRAY_NESTING = 2
DEFAULT_ALIGNMENT = 32
# Arrays we skip rather than materialise; we keep (offset, length) of each string instead.
LAZY_STRING_ARRAYS = frozenset({"tokenizer.ggml.tokens", "tokenizer.ggml.merges"})

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

_REMEDY = "Download the model again, or pick another GGUF file."


@dataclass(frozen=True)
class TensorEntry:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the start of the data section
    n_bytes: int


@dataclass(frozen=True)
class LazyStrings:
    """Offsets of a string array's items in the file, decoded only on demand."""

    path: Path
    spans: tuple[tuple[int, int], ...]

    def __len__(self) -> int:
        return len(self.spans)

    def get(self, index: int) -> str | None:
        if not 0 <= index < len(self.spans):
            return None
        start, length = self.spans[index]
        with self.path.open("rb") as handle:
            handle.seek(start)
            return handle.read(length).decode("utf-8", errors="replace")


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorEntry, ...]
    data_offset: int
    file_size_bytes: int


class _Cursor:
    def __init__(self, buffer: mmap.mmap, path: Path) -> None:
        self.buf = buffer
        self.pos = 0
        self.size = len(buffer)
        self.path = path

    def fail(self, why: str) -> ModelFileError:
        return ModelFileError(f"{self.path.name} is not a valid GGUF file: {why}.", _REMEDY)

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

    def string(self, what: str) -> str:
        start, length = self.string_span(what)
        try:
            return bytes(self.buf[start : start + length]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{what} is not UTF-8") from exc


def read_header(path: Path) -> GGUFHeader:
    """Parse and bounds-check the header of the GGUF file at ``path``."""
    if not path.exists():
        raise ModelFileError(f"Model file not found: {path}.", "Check the path, or unset it to use the embedded model.")
    if not path.is_file():
        raise ModelFileError(f"{path} is not a file.", "Point Hearth at a .gguf file, not a folder.")
    size = path.stat().st_size
    if size < 24:
        raise ModelFileError(f"{path.name} is empty or far too small to be a GGUF model ({size} bytes).", _REMEDY)
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
        return _parse(_Cursor(buffer, path))


def _parse(cur: _Cursor) -> GGUFHeader:
    if bytes(cur.buf[:4]) != MAGIC:
        raise ModelFileError(
            f"{cur.path.name} is not a GGUF file (it does not start with the GGUF signature).",
            "Hearth runs GGUF models; convert the model with llama.cpp's convert_hf_to_gguf.py or pick a .gguf.",
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

    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = cur.string("metadata key")
        value_type = cur.u32(f"type of {key}")
        metadata[key] = _read_value(cur, key, value_type, depth=0)

    tensors = [_read_tensor_info(cur) for _ in range(tensor_count)]
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise cur.fail(f"general.alignment {alignment!r} is not a power of two")
    data_offset = -(-cur.pos // alignment) * alignment
    _check_tensor_layout(cur, tensors, data_offset, alignment)
    return GGUFHeader(version, metadata, tuple(tensors), data_offset, cur.size)


def _read_value(cur: _Cursor, key: str, value_type: int, depth: int) -> Any:
    if value_type in _SCALARS:
        return cur.scalar(value_type, key)
    if value_type == _STRING:
        return cur.string(key)
    if value_type == _ARRAY:
        if depth >= MAX_ARRAY_NESTING:
            raise cur.fail(f"{key} nests arrays too deeply")
        item_type = cur.u32(f"item type of {key}")
        count = cur.u64(f"length of {key}")
        if item_type in _SCALARS:
            width = _SCALARS[item_type][1]
            cur.need(count * width, key)
            if count > 4096:  # big numeric arrays (scores, token types) are skipped, not decoded
                cur.pos += count * width
                return None
            return [cur.scalar(item_type, key) for _ in range(count)]
        if item_type == _STRING:
            cur.need(count * 8, key)
            spans = tuple(cur.string_span(key) for _ in range(count))
            if key in LAZY_STRING_ARRAYS or count > 4096:
                return LazyStrings(cur.path, spans)
            return [bytes(cur.buf[s : s + n]).decode("utf-8", errors="replace") for s, n in spans]
        if item_type == _ARRAY:
            cur.need(count * 12, key)
            return [_read_value(cur, key, _ARRAY, depth + 1) for _ in range(count)]
        raise cur.fail(f"{key} has an unknown array item type {item_type}")
    raise cur.fail(f"{key} has an unknown value type {value_type}")


def _read_tensor_info(cur: _Cursor) -> TensorEntry:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    name = cur.string("tensor name")
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
        if not isinstance(value, kind):
            raise ModelFileError(
                f"{path.name} is not a valid GGUF file: {key} has type {type(value).__name__}, "
                f"expected {kind.__name__}.",
                _REMEDY,
            )
        return value

    return get
