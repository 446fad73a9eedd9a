"""models.tuning.gguf_reading: the trainer's process reads a GGUF once while the file stands unchanged, and builds
gguf's tensor name map once per architecture and block count, with the same result as building it again."""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np
import pytest

from models.tuning import gguf_reading


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """read_once installed for this test only: gguf's own reader and name map are put back after it."""
    monkeypatch.setattr(gguf, "GGUFReader", gguf.GGUFReader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", gguf.get_tensor_name_map)
    monkeypatch.setattr(gguf_reading, "_READERS", {})
    gguf_reading.read_once()


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


def test_a_file_is_read_once_while_it_stands_and_again_when_it_changes(kept: None, tmp_path: Path) -> None:
    path = tiny_gguf(tmp_path / "m.gguf", "first")
    first = gguf.GGUFReader(path)
    assert gguf.GGUFReader(str(path)) is first and name_of(first) == "first"
    assert np.array_equal(first.tensors[0].data, np.arange(8, dtype=np.float32).reshape(2, 4))
    tiny_gguf(path, "second, longer")
    os.utime(path, ns=(1, 1))  # a new modification time whatever the clock's resolution
    again = gguf.GGUFReader(path)
    assert again is not first and name_of(again) == "second, longer"


def test_the_name_map_is_built_once_and_maps_as_a_new_one_does(kept: None) -> None:
    arch = gguf.MODEL_ARCH.LLAMA
    kept_map = gguf.get_tensor_name_map(arch, 30)
    assert gguf.get_tensor_name_map(arch, 30) is kept_map
    fresh = gguf.tensor_mapping.get_tensor_name_map(arch, 30)  # gguf's own function, not the kept one
    assert kept_map.mapping == fresh.mapping
    assert kept_map.get_name("model.layers.29.self_attn.q_proj") == "blk.29.attn_q"
    assert gguf.get_tensor_name_map(arch, 12) is not kept_map


def test_installing_twice_keeps_one_layer(kept: None) -> None:
    reader_class = gguf.GGUFReader
    gguf_reading.read_once()
    assert gguf.GGUFReader is reader_class


def test_the_readers_are_let_go_when_the_reading_ends(kept: None, tmp_path: Path) -> None:
    path = tiny_gguf(tmp_path / "m.gguf", "first")
    with gguf_reading.reading_once():
        inside = gguf.GGUFReader(path)
        assert gguf.GGUFReader(path) is inside
    assert gguf_reading._READERS == {}  # a kept reader maps the whole file: not while the model trains
    assert gguf.GGUFReader(path) is not inside
