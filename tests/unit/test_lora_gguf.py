"""LoRA adapters in llama.cpp's format: peft's tensors renamed (and, for llama, its query and key rows put back in
llama.cpp's order), and an adapter checked against its base model before it is ever used."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from models.shared.errors import AdapterError
from models.tuning.lora_gguf import BASE_SHA_KEY, check_adapter, gguf_tensor_name, llama_rows, write_adapter

RANK = 2
PEFT = "base_model.model.model.layers.{}.{}.lora_{}.weight"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight", ("blk.3.attn_q.weight", "a")),
        ("base_model.model.model.layers.12.mlp.down_proj.lora_B.weight", ("blk.12.ffn_down.weight", "b")),
        ("base_model.model.model.layers.0.self_attn.o_proj.lora_B.default.weight", ("blk.0.attn_output.weight", "b")),
        ("model.layers.7.mlp.gate_proj.lora_A.weight", ("blk.7.ffn_gate.weight", "a")),
    ],
)
def test_peft_keys_map_to_llama_cpp_names(key: str, expected: tuple[str, str]) -> None:
    assert gguf_tensor_name(key) == expected


@pytest.mark.parametrize(
    "key",
    [
        "base_model.model.model.layers.3.self_attn.rotary.lora_A.weight",
        "base_model.model.lm_head.lora_A.weight",
        "base_model.model.model.layers.3.self_attn.q_proj.weight",
    ],
)
def test_a_weight_that_cannot_be_placed_is_refused(key: str) -> None:
    with pytest.raises(AdapterError, match="cannot place") as caught:
        gguf_tensor_name(key)
    assert key in caught.value.message


def test_llama_rows_interleaves_the_halves_of_each_head() -> None:
    rows = np.arange(4, dtype=np.float32).reshape(4, 1)
    assert llama_rows(rows, heads=1)[:, 0].tolist() == [0, 2, 1, 3]
    # Two heads of four rows each: each head on its own.
    rows = np.arange(8, dtype=np.float32).reshape(8, 1)
    assert llama_rows(rows, heads=2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def test_llama_rows_permutes_whole_rows() -> None:
    weights = np.random.default_rng(0).standard_normal((12, 3)).astype(np.float32)
    moved = llama_rows(weights, heads=2)
    assert moved.shape == weights.shape
    assert sorted(map(tuple, moved.tolist())) == sorted(map(tuple, weights.tolist()))
    assert not np.array_equal(moved, weights)
    heads, half = 2, 12 // 2 // 2
    expected = weights.reshape(heads, 2, half, 3).swapaxes(1, 2).reshape(weights.shape)
    assert np.array_equal(moved, expected)


def write_base(path: Path, architecture: str = "llama", general_type: str = "model") -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_string("general.type", general_type)
    writer.add_tensor("blk.0.attn_q.weight", np.ones((8, 8), dtype=np.float32))
    writer.add_tensor("blk.0.attn_v.weight", np.ones((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def peft_tensors(layer: int = 0, v_rows: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        PEFT.format(layer, "self_attn.q_proj", "A"): rng.standard_normal((RANK, 8)).astype(np.float32),
        PEFT.format(layer, "self_attn.q_proj", "B"): rng.standard_normal((8, RANK)).astype(np.float32),
        PEFT.format(layer, "self_attn.v_proj", "A"): rng.standard_normal((RANK, 8)).astype(np.float32),
        PEFT.format(layer, "self_attn.v_proj", "B"): rng.standard_normal((v_rows, RANK)).astype(np.float32),
    }


def write(path: Path, tensors: dict[str, np.ndarray], architecture: str = "llama") -> Path:
    write_adapter(path, architecture, tensors, 16.0, 2, 1, {BASE_SHA_KEY: "ef" * 32})
    return path


def base_model(path: Path, architecture: str = "llama") -> Any:
    return SimpleNamespace(path=path, architecture=architecture)


def test_a_written_adapter_checks_against_its_base(tmp_path: Path) -> None:
    base = write_base(tmp_path / "base.gguf")
    adapter = write(tmp_path / "adapter.gguf", peft_tensors())
    assert not (tmp_path / "adapter.gguf.partial").exists()
    facts = check_adapter(adapter, base_model(base))
    assert facts.architecture == "llama"
    assert facts.rank == RANK
    assert facts.alpha == 16.0
    assert facts.tensors == 2
    assert facts.base_sha256 == "ef" * 32


def test_llama_query_rows_are_reordered_and_others_kept(tmp_path: Path) -> None:
    import gguf

    tensors = peft_tensors()
    adapter = write(tmp_path / "adapter.gguf", tensors)
    stored = {t.name: np.array(t.data) for t in gguf.GGUFReader(adapter).tensors}
    q_b = tensors[PEFT.format(0, "self_attn.q_proj", "B")]
    assert np.array_equal(stored["blk.0.attn_q.weight.lora_b"], llama_rows(q_b, 2))
    assert np.array_equal(stored["blk.0.attn_q.weight.lora_a"], tensors[PEFT.format(0, "self_attn.q_proj", "A")])
    assert np.array_equal(stored["blk.0.attn_v.weight.lora_b"], tensors[PEFT.format(0, "self_attn.v_proj", "B")])


def test_qwen2_rows_are_kept(tmp_path: Path) -> None:
    import gguf

    tensors = peft_tensors()
    adapter = write(tmp_path / "adapter.gguf", tensors, architecture="qwen2")
    stored = {t.name: np.array(t.data) for t in gguf.GGUFReader(adapter).tensors}
    assert np.array_equal(stored["blk.0.attn_q.weight.lora_b"], tensors[PEFT.format(0, "self_attn.q_proj", "B")])


def test_a_model_is_not_an_adapter(tmp_path: Path) -> None:
    base = write_base(tmp_path / "base.gguf")
    with pytest.raises(AdapterError, match=r"not a LoRA adapter \(general.type is 'model'\)") as caught:
        check_adapter(base, base_model(base))
    assert caught.value.remedy


def test_an_adapter_for_another_architecture_is_refused(tmp_path: Path) -> None:
    base = write_base(tmp_path / "qwen.gguf", architecture="qwen2")
    adapter = write(tmp_path / "adapter.gguf", peft_tensors())
    with pytest.raises(AdapterError, match=r"made for a llama model; qwen\.gguf is qwen2"):
        check_adapter(adapter, base_model(base, "qwen2"))


def test_mismatched_shapes_name_the_weight(tmp_path: Path) -> None:
    base = write_base(tmp_path / "base.gguf")
    adapter = write(tmp_path / "adapter.gguf", peft_tensors(v_rows=6))
    with pytest.raises(AdapterError, match=r"blk\.0\.attn_v\.weight is 8x6 but base\.gguf's is 8x4"):
        check_adapter(adapter, base_model(base))


def test_an_adapter_for_a_weight_the_base_lacks_is_refused(tmp_path: Path) -> None:
    base = write_base(tmp_path / "base.gguf")
    adapter = write(tmp_path / "adapter.gguf", peft_tensors(layer=5))
    with pytest.raises(AdapterError, match=r"adapts blk\.5\.attn_[qv]\.weight, which base\.gguf does not have"):
        check_adapter(adapter, base_model(base))


def test_an_unreadable_adapter_is_an_adapter_error(tmp_path: Path) -> None:
    base = write_base(tmp_path / "base.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all, just some text")
    with pytest.raises(AdapterError, match=r"junk\.gguf cannot be read"):
        check_adapter(junk, base_model(base))


def test_only_tunable_architectures_are_written(tmp_path: Path) -> None:
    target = tmp_path / "adapter.gguf"
    with pytest.raises(AdapterError, match="gemma3") as caught:
        write(target, peft_tensors(), architecture="gemma3")
    assert "llama" in caught.value.remedy
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_no_file(tmp_path: Path) -> None:
    tensors = {**peft_tensors(), "base_model.model.lm_head.lora_A.weight": np.ones((RANK, 8), dtype=np.float32)}
    with pytest.raises(AdapterError, match="cannot place"):
        write(tmp_path / "adapter.gguf", tensors)
    assert list(tmp_path.iterdir()) == []


def test_a_one_dimensional_lora_b_is_an_adapter_error(tmp_path: Path) -> None:
    import gguf

    base = write_base(tmp_path / "base.gguf")
    adapter = tmp_path / "adapter.gguf"
    writer = gguf.GGUFWriter(str(adapter), "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", 16.0)
    writer.add_tensor("blk.0.attn_v.weight.lora_a", np.ones((RANK, 8), dtype=np.float32))
    writer.add_tensor("blk.0.attn_v.weight.lora_b", np.ones(4 * RANK, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(AdapterError, match=r"blk\.0\.attn_v\.weight"):
        check_adapter(adapter, base_model(base))
