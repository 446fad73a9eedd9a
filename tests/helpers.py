"""Helpers shared by tests: fixture inventories and the skip-or-fail rule for real components."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backends.hardware import HardwareInventory, LlamaCppBuild

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM = Path("/usr/bin/chromium")


def require(available: bool, component: str, remedy: str) -> None:
    """Skip when a real component is missing on a developer machine; fail in CI, where it must be there."""
    if available:
        return
    message = f"{component} is not available ({remedy})"
    if IN_CI:
        pytest.fail(f"CI requires {message}", pytrace=False)
    pytest.skip(message)


def make_inventory(
    ram_available_gib: float = 16.0,
    physical_cores: int = 4,
    llama: bool = True,
    flags: frozenset[str] | None = None,
) -> HardwareInventory:
    gib = 1 << 30
    return HardwareInventory(
        cpu_model="Test CPU",
        physical_cores=physical_cores,
        logical_cores=physical_cores * 2,
        isa_flags=flags if flags is not None else frozenset({"avx2", "fma"}),
        ram_total_bytes=int(max(ram_available_gib, 1) * 2 * gib),
        ram_available_bytes=int(ram_available_gib * gib),
        os="Linux test",
        llama_cpp=LlamaCppBuild("0.3.36", ("cpu", "rpc"), True) if llama else None,
    )


def write_tiny_gguf(
    path: Path,
    *,
    context_length: int = 2048,
    chat_template: str | None = None,
    tensors: int = 2,
    extra: dict[str, int] | None = None,
) -> Path:
    """A small but well-formed llama-architecture GGUF, written with the gguf package's own writer."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny test model")
    writer.add_context_length(context_length)
    writer.add_block_count(2)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["<s>", "</s>", "hello", "world"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for key, value in (extra or {}).items():
        writer.add_uint32(key, value)
    for index in range(tensors):
        writer.add_tensor(f"blk.{index}.attn_q.weight", np.full((8, 64), index, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
