"""Where llama.cpp puts a model's weights for an offload, as the planner counts it (the integration test
`test_offload_placement` checks these counts against llama.cpp's own buffer sizes)."""

from __future__ import annotations

import dataclasses

from backends.memory import MIB, estimate_offload, llama_gpu_layers
from tests.helpers import synthetic_model

# 32 layers of 100 MiB, a 250 MiB token embedding and a 200 MiB output projection of its own
MODEL = synthetic_model(
    "m", layers=32, layer_mib=100, embed_mib=250, output_mib=200, embedding=4096, heads=32, kv_heads=8
)


def test_llama_counts_the_output_projection_as_the_first_layer_it_offloads() -> None:
    assert llama_gpu_layers(0, 32) == 0
    assert llama_gpu_layers(1, 32) == 2
    assert llama_gpu_layers(32, 32) == 33
    assert llama_gpu_layers(40, 32) == 33


def test_a_partial_offload_takes_the_output_projection_with_it_and_the_cpu_keeps_the_first_layers() -> None:
    offload = estimate_offload(MODEL, 4096, (10,))
    assert offload.gpus[0].weights_bytes == (10 * 100 + 200) * MIB
    assert offload.cpu.weights_bytes == (22 * 100 + 250) * MIB  # its own output projection left the CPU


def test_kept_here_the_output_projection_stays_on_the_cpu_with_its_logits() -> None:
    offload = estimate_offload(MODEL, 4096, (16, 16), output_here=True)
    assert [gpu.weights_bytes for gpu in offload.gpus] == [1600 * MIB, 1600 * MIB]
    assert offload.cpu.weights_bytes == (250 + 200) * MIB
    assert offload.cpu.compute_bytes == offload.gpus[0].compute_bytes  # the logits' buffer is here


def test_a_tied_projection_is_the_token_embedding_which_stays_on_the_cpu_either_way() -> None:
    tied = dataclasses.replace(MODEL, other_bytes=250 * MIB, output_bytes=250 * MIB, output_tied=True)
    away = estimate_offload(tied, 4096, (32,))
    assert away.gpus[0].weights_bytes == (3200 + 250) * MIB  # llama.cpp makes the GPU its own copy
    assert away.cpu.weights_bytes == 250 * MIB  # the lookup still reads the embedding here
    assert estimate_offload(tied, 4096, (32,), output_here=True).cpu.weights_bytes == 250 * MIB
