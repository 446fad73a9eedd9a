"""The roofline arithmetic: what one decoding step reads, the ceiling a bandwidth sets, and a share of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.memory import kv_cache_bytes
from backends.roofline import bytes_per_token, ceiling_tokens_per_s, share_of_ceiling
from models.gguf import read_model_info
from tests.helpers import write_tiny_gguf


def test_a_step_reads_the_layers_the_output_and_the_cache_so_far(tmp_path: Path) -> None:
    model = read_model_info(write_tiny_gguf(tmp_path / "m.gguf"))
    step = bytes_per_token(model, context_used=0)
    assert step == sum(model.layer_bytes) + model.output_bytes
    assert bytes_per_token(model, context_used=100) == step + kv_cache_bytes(model, 100)


def test_the_ceiling_and_the_share() -> None:
    assert ceiling_tokens_per_s(20e9, 1_000_000_000) == pytest.approx(20.0)
    assert share_of_ceiling(15.0, 20e9, 1_000_000_000) == pytest.approx(0.75)
    assert ceiling_tokens_per_s(20e9, 0) == 0.0 and share_of_ceiling(5.0, 20e9, 0) == 0.0
