"""GGUF files for tests, written byte by byte: the hostile ones that the gguf package's writer cannot make cheaply
(millions of array items, duplicate keys, over-long values), around a small but well-formed model."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

STRING, ARRAY, UINT32 = 8, 9, 4
_CHUNK_ITEMS = 1 << 20


def text(value: str) -> bytes:
    raw = value.encode()
    return struct.pack("<Q", len(raw)) + raw


def u32_entry(key: str, value: int) -> bytes:
    return text(key) + struct.pack("<II", UINT32, value)


def string_entry(key: str, value: str) -> bytes:
    return text(key) + struct.pack("<I", STRING) + text(value)


def strings_entry(key: str, values: Sequence[str]) -> bytes:
    return text(key) + struct.pack("<IIQ", ARRAY, STRING, len(values)) + b"".join(text(v) for v in values)


def bytes_entry(key: str, count: int) -> bytes:
    """An array of ``count`` zero bytes (uint8), such as a hostile file pads its header with."""
    return text(key) + struct.pack("<IIQ", ARRAY, 0, count) + bytes(count)


@dataclass(frozen=True)
class EmptyStrings:
    """An array of ``count`` empty strings, streamed to the file (12.5 million take 100 MB)."""

    key: str
    count: int

    def write(self, out: BinaryIO) -> None:
        out.write(text(self.key) + struct.pack("<IIQ", ARRAY, STRING, self.count))
        chunk = bytes(8 * _CHUNK_ITEMS)
        left = self.count
        while left:
            step = min(left, _CHUNK_ITEMS)
            out.write(chunk[: 8 * step])
            left -= step


Entry = bytes | EmptyStrings


def write_model(
    path: Path, *, architecture: str = "llama", entries: Sequence[Entry] = (), tensor_name: str = "blk.0.attn_q.weight"
) -> Path:
    """A one-layer model of ``architecture`` with one F32 tensor, plus ``entries`` after its own metadata."""
    own = [
        string_entry("general.architecture", architecture),
        string_entry("general.name", "test model"),
        u32_entry(f"{architecture}.context_length", 2048),
        u32_entry(f"{architecture}.block_count", 1),
        u32_entry(f"{architecture}.embedding_length", 64),
        u32_entry(f"{architecture}.attention.head_count", 4),
        u32_entry("general.file_type", 0),
    ]
    shape = (64, 8)
    tensor = text(tensor_name) + struct.pack("<I", len(shape)) + struct.pack("<QQ", *shape) + struct.pack("<IQ", 0, 0)
    with path.open("wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, 1, len(own) + len(entries)))
        for entry in [*own, *entries]:
            if isinstance(entry, EmptyStrings):
                entry.write(out)
            else:
                out.write(entry)
        out.write(tensor)
        out.write(bytes(-out.tell() % 32))
        out.write(bytes(4 * shape[0] * shape[1]))
    return path


def write_split_copy(source: Path, folder: Path, parts: int) -> list[Path]:
    """The model at ``source`` split into ``parts`` files in ``folder``, as llama.cpp's gguf-split writes them
    (``NAME-00001-of-0000N.gguf``…, ``split.*`` keys in each): every metadata value and every tensor's bytes copied as
    they are, with the gguf package's own reader and writer."""
    import gguf

    reader = gguf.GGUFReader(str(source))
    per_part = -(-len(reader.tensors) // parts)
    base = folder / source.name.removesuffix(".gguf")
    architecture = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(f"{base}.gguf", architecture, split_max_tensors=per_part)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # the header's own counts, and the architecture the writer was made with
        kind = field.types[0]
        item = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), kind, sub_type=item)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    written = sorted(folder.glob(f"{base.name}-*-of-*.gguf"))
    assert len(written) == parts, written
    return written
