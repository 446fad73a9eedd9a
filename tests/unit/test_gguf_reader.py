"""GGUF files are untrusted: each broken or hostile file is refused with a reason, before llama.cpp sees it."""

import struct
from pathlib import Path

import pytest

from models.gguf import read_model_info
from models.gguf_reader import read_header
from models.shared.errors import ModelFileError
from tests.helpers import write_tiny_gguf


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def patched(source: Path, target: Path, offset: int, data: bytes) -> Path:
    raw = bytearray(source.read_bytes())
    raw[offset : offset + len(data)] = data
    target.write_bytes(bytes(raw))
    return target


def field_offset(path: Path, needle: bytes) -> int:
    """Offset just past a metadata key (where its type and value start)."""
    return path.read_bytes().index(needle) + len(needle)


def test_a_well_formed_file_is_read(tiny: Path) -> None:
    info = read_model_info(tiny)
    assert info.architecture == "llama"
    assert info.block_count == 2
    assert info.head_count_kv == 2
    assert info.head_dim_k == 16
    assert info.trained_context_length == 2048
    assert info.bos_token == "<s>"
    assert info.vocab_size == 4
    assert info.parameter_count == 2 * 8 * 64


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="not found") as caught:
        read_header(tmp_path / "nope.gguf")
    assert caught.value.remedy


def test_a_folder_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="not a file"):
        read_header(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(ModelFileError, match="empty"):
        read_header(empty)


def test_wrong_magic(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("This is a text file pretending to be a model. " * 10)
    with pytest.raises(ModelFileError, match="not a GGUF file") as caught:
        read_header(text)
    assert ".gguf" in caught.value.remedy


def test_unsupported_version(tiny: Path, tmp_path: Path) -> None:
    bad = patched(tiny, tmp_path / "v9.gguf", 4, struct.pack("<I", 9))
    with pytest.raises(ModelFileError, match="version 9"):
        read_header(bad)


@pytest.mark.parametrize("keep_bytes", [30, 300, 900, 3000])
def test_truncated_files_are_refused(tiny: Path, tmp_path: Path, keep_bytes: int) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny.read_bytes()[:keep_bytes])
    with pytest.raises(ModelFileError, match=r"past the end|truncated|more than fit"):
        read_header(cut)


def test_absurd_counts(tiny: Path, tmp_path: Path) -> None:
    bad = patched(tiny, tmp_path / "counts.gguf", 8, struct.pack("<QQ", 2**40, 2**40))
    with pytest.raises(ModelFileError, match="more than fit"):
        read_header(bad)


def test_string_length_past_the_end(tiny: Path, tmp_path: Path) -> None:
    # general.name's value: type (u32) then length (u64) then the bytes.
    at = field_offset(tiny, b"general.name") + 4
    bad = patched(tiny, tmp_path / "string.gguf", at, struct.pack("<Q", 2**50))
    with pytest.raises(ModelFileError, match="past the end"):
        read_header(bad)


def test_too_many_dimensions(tiny: Path, tmp_path: Path) -> None:
    at = field_offset(tiny, b"blk.0.attn_q.weight")
    bad = patched(tiny, tmp_path / "dims.gguf", at, struct.pack("<I", 7))
    with pytest.raises(ModelFileError, match="7 dimensions"):
        read_header(bad)


def test_unknown_quantization_type(tiny: Path, tmp_path: Path) -> None:
    at = field_offset(tiny, b"blk.0.attn_q.weight") + 4 + 2 * 8
    bad = patched(tiny, tmp_path / "qtype.gguf", at, struct.pack("<I", 999))
    with pytest.raises(ModelFileError, match="unknown quantization type 999"):
        read_header(bad)


def test_overlapping_tensors(tiny: Path, tmp_path: Path) -> None:
    at = field_offset(tiny, b"blk.1.attn_q.weight") + 4 + 2 * 8 + 4
    bad = patched(tiny, tmp_path / "overlap.gguf", at, struct.pack("<Q", 1024))
    with pytest.raises(ModelFileError, match="overlap"):
        read_header(bad)


def test_tensor_data_past_the_end(tiny: Path, tmp_path: Path) -> None:
    at = field_offset(tiny, b"blk.1.attn_q.weight") + 4 + 2 * 8 + 4
    bad = patched(tiny, tmp_path / "offset.gguf", at, struct.pack("<Q", 2**20))
    with pytest.raises(ModelFileError, match="truncated"):
        read_header(bad)


def test_out_of_range_metadata(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "ctx.gguf", context_length=0)
    with pytest.raises(ModelFileError, match="context_length = 0 is out of range"):
        read_model_info(path)


def test_wrong_metadata_type(tmp_path: Path, tiny: Path) -> None:
    # llama.block_count stored as a string instead of an integer.
    import gguf

    writer = gguf.GGUFWriter(str(tmp_path / "typed.gguf"), "llama")
    writer.add_string("llama.block_count", "thirty")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelFileError, match="block_count has type str"):
        read_model_info(tmp_path / "typed.gguf")


def _vocabulary_gguf(path: Path, tokens: list[str], types: list[int] | None) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    if types is not None:
        writer.add_token_types(types)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("filler", [4, 3000], ids=["types-decoded-with-the-header", "types-read-on-demand"])
def test_the_special_tokens_are_read_from_the_vocabulary(tmp_path: Path, filler: int) -> None:
    from models.gguf import special_token_texts

    words = [f"word{i}" for i in range(filler)]
    tokens = ["<|im_start|>", *words, "<tool_call>", "<unk>", "<|im_end|>"]
    # llama.cpp's token types: 1 normal, 2 unknown, 3 control, 4 user-defined
    types = [3, *[1] * filler, 4, 2, 3]
    path = _vocabulary_gguf(tmp_path / "vocab.gguf", tokens, types)
    assert special_token_texts(path) == ["<|im_start|>", "<tool_call>", "<|im_end|>"]
    assert special_token_texts(_vocabulary_gguf(tmp_path / "untyped.gguf", tokens, None)) == []


def test_token_types_that_run_past_the_end_are_refused(tmp_path: Path) -> None:
    from models.gguf import special_token_texts

    tokens = [f"t{i}" for i in range(3000)]
    path = _vocabulary_gguf(tmp_path / "vocab.gguf", tokens, [1] * 3000)
    # past the key: the value's type (array), the items' type, then the count: claim more items than the file holds
    count_at = field_offset(path, b"tokenizer.ggml.token_type") + 8
    assert struct.unpack_from("<Q", path.read_bytes(), count_at) == (3000,)
    cut = patched(path, tmp_path / "cut.gguf", count_at, struct.pack("<Q", 1 << 19))
    with pytest.raises(ModelFileError):
        special_token_texts(cut)
