"""The GGUF reader keeps little and refuses headers past its budgets, with the reason, before parsing far."""

import os
import struct
from pathlib import Path

import pytest

from models import gguf_reader
from models.gguf import read_model_info
from models.gguf_reader import (
    ModelFileUnreadable,
    NotAModelFile,
    SkippedArray,
    SkippedString,
    read_header,
)
from models.shared.errors import ModelFileError
from tests.gguf_files import (
    EmptyStrings,
    bytes_entry,
    string_entry,
    strings_entry,
    u32_entry,
    write_model,
)


def test_a_vocabulary_is_counted_not_kept_and_its_special_tokens_are_read_from_the_file(tmp_path: Path) -> None:
    vocabulary = [f"tok{i}" for i in range(100_000)]
    vocabulary[99_998], vocabulary[99_999] = "<|begin|>", "<|end|>"
    path = write_model(
        tmp_path / "big-vocab.gguf",
        entries=[
            strings_entry("tokenizer.ggml.tokens", vocabulary),
            u32_entry("tokenizer.ggml.bos_token_id", 99_998),
            u32_entry("tokenizer.ggml.eos_token_id", 99_999),
        ],
    )
    tokens = read_header(path).metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, SkippedArray) and tokens.count == 100_000  # an offset and a count, not 100,000 strings
    info = read_model_info(path)
    assert (info.vocab_size, info.bos_token, info.eos_token) == (100_000, "<|begin|>", "<|end|>")


def test_twelve_million_empty_strings_are_refused_before_they_are_walked(tmp_path: Path) -> None:
    path = write_model(tmp_path / "hostile.gguf", entries=[EmptyStrings("tokenizer.ggml.tokens", 12_500_000)])
    with pytest.raises(ModelFileError) as refused:
        read_model_info(path)
    assert "tokenizer.ggml.tokens has 12,500,000 items" in refused.value.message
    assert "at most 1,048,576 per array" in refused.value.message
    assert "download the model again" in refused.value.remedy


def test_arrays_past_the_total_budget_are_refused(tmp_path: Path) -> None:
    # Each array is under the per-array limit (and skipped by seeking), but together they are over the total.
    count = gguf_reader.MAX_ARRAY_ITEMS
    entries = [bytes_entry(f"padding.{i}", count) for i in range(gguf_reader.MAX_TOTAL_ARRAY_ITEMS // count + 1)]
    with pytest.raises(ModelFileError, match=r"its arrays have more than 4,194,304 items"):
        read_header(write_model(tmp_path / "padded.gguf", entries=entries))


def test_too_many_metadata_keys_are_refused(tmp_path: Path) -> None:
    entries = [u32_entry(f"k.{i}", i) for i in range(gguf_reader.MAX_METADATA_KEYS)]
    with pytest.raises(ModelFileError, match=r"it has 8,199 metadata entries \(Hearth reads at most 8,192"):
        read_header(write_model(tmp_path / "keys.gguf", entries=entries))


def test_a_long_value_nobody_needs_is_skipped_but_a_long_chat_template_is_refused(tmp_path: Path) -> None:
    two_mb = "x" * (2 << 20)
    embedded_json = write_model(tmp_path / "json.gguf", entries=[string_entry("tokenizer.huggingface.json", two_mb)])
    assert read_header(embedded_json).metadata["tokenizer.huggingface.json"] == SkippedString(2 << 20)
    assert read_model_info(embedded_json).architecture == "llama"

    template = write_model(tmp_path / "template.gguf", entries=[string_entry("tokenizer.chat_template", two_mb)])
    with pytest.raises(ModelFileError, match=r"tokenizer\.chat_template is 2,097,152 bytes long"):
        read_model_info(template)


def test_duplicate_keys_and_overlong_names_are_refused(tmp_path: Path) -> None:
    twice = write_model(tmp_path / "twice.gguf", entries=[u32_entry("llama.block_count", 2)])
    with pytest.raises(ModelFileError, match=r"llama\.block_count appears twice"):
        read_header(twice)
    long_name = write_model(tmp_path / "name.gguf", tensor_name="blk.0." + "x" * 100)
    with pytest.raises(ModelFileError, match="tensor name is 106 bytes long"):
        read_header(long_name)
    long_key = write_model(tmp_path / "key.gguf", entries=[u32_entry("k" * 5000, 1)])
    with pytest.raises(ModelFileError, match="metadata key is 5000 bytes long"):
        read_header(long_key)


def test_a_token_id_past_the_vocabulary_gives_no_token(tmp_path: Path) -> None:
    path = write_model(
        tmp_path / "ids.gguf",
        entries=[strings_entry("tokenizer.ggml.tokens", ["a", "b"]), u32_entry("tokenizer.ggml.bos_token_id", 7)],
    )
    info = read_model_info(path)
    assert (info.vocab_size, info.bos_token, info.eos_token) == (2, "", "")


def test_what_is_not_a_readable_gguf_file_is_told_apart_by_type(tmp_path: Path) -> None:
    """The page answers these alike (see test_model_import_page); the types let it, without parsing messages."""
    with pytest.raises(ModelFileUnreadable, match="not found"):
        read_header(tmp_path / "missing.gguf")
    with pytest.raises(ModelFileUnreadable, match="not found"):
        read_header(tmp_path / "missing-folder" / "x.gguf")
    text_file = tmp_path / "notes.txt"
    text_file.write_text("a text file")
    with pytest.raises(ModelFileUnreadable, match="not found"):
        read_header(text_file / "x.gguf")  # a path through a file
    with pytest.raises(ModelFileUnreadable, match="not a file"):
        read_header(tmp_path)
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    with pytest.raises(ModelFileUnreadable, match="not a file"):
        read_header(fifo)  # refused without opening it (opening a pipe would wait for a writer)
    with pytest.raises(NotAModelFile, match="too small"):
        read_header(_write(tmp_path / "tiny.gguf", b"GGUF"))
    with pytest.raises(NotAModelFile, match="GGUF signature"):
        read_header(_write(tmp_path / "text.gguf", b"x" * 100))
    truncated = _write(tmp_path / "cut.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + b"\xff" * 8)
    with pytest.raises(ModelFileError) as damaged:
        read_header(truncated)
    assert not isinstance(damaged.value, ModelFileUnreadable | NotAModelFile)  # a GGUF file, damaged


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
