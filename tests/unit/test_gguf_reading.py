"""models.tuning.gguf_reading: while a model is read, a GGUF is read once while the file stands unchanged, and
gguf's tensor name map is built once per architecture and block count with the same result as building it again;
afterwards gguf's own reader and function are back and the readers let go."""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np

from models.tuning.gguf_reading import reading_once


def tiny_gguf(path: Path, name: str) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_tensor("token_embd.weight", np.arange(8, dtype=np.float32).reshape(2, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def name_of(reader: gguf.GGUFReader) -> str:
    field = reader.fields["general.name"]
    return bytes(field.parts[field.data[0]]).decode()


def test_a_file_is_read_once_while_it_stands_and_again_when_it_changes(tmp_path: Path) -> None:
    path = tiny_gguf(tmp_path / "m.gguf", "first")
    with reading_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first and name_of(first) == "first"
        assert np.array_equal(first.tensors[0].data, np.arange(8, dtype=np.float32).reshape(2, 4))
        tiny_gguf(path, "second, longer")
        os.utime(path, ns=(1, 1))  # a new modification time whatever the clock's resolution
        again = gguf.GGUFReader(path)
        assert again is not first and name_of(again) == "second, longer"


def test_the_name_map_is_built_once_and_maps_as_a_new_one_does() -> None:
    arch = gguf.MODEL_ARCH.LLAMA
    with reading_once():
        kept_map = gguf.get_tensor_name_map(arch, 30)
        assert gguf.get_tensor_name_map(arch, 30) is kept_map
        assert gguf.get_tensor_name_map(arch, 12) is not kept_map
    fresh = gguf.get_tensor_name_map(arch, 30)  # gguf's own again: a new one
    assert fresh is not kept_map and kept_map.mapping == fresh.mapping
    assert kept_map.get_name("model.layers.29.self_attn.q_proj") == "blk.29.attn_q"


def test_afterwards_gguf_is_its_own_and_the_readers_are_let_go(tmp_path: Path) -> None:
    path = tiny_gguf(tmp_path / "m.gguf", "first")
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with reading_once():
        inside = gguf.GGUFReader(path)
        assert gguf.GGUFReader is not reader_class
    assert gguf.GGUFReader is reader_class and gguf.get_tensor_name_map is name_map
    assert gguf.GGUFReader(path) is not inside  # a kept reader maps the whole file: not while the model trains
