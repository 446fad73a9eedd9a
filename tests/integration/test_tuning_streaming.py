"""Streaming decoder layers through a window (models/tuning/streaming.py) with real transformers, peft and torch
autograd: the adapter's gradients are those of the model held whole, and never more than the window's layers hold
their weights on the device. On the CPU the copies are no-ops, so this checks the bookkeeping and that the hooks
run again in the backward pass's recomputation; tests/hardware checks the copies on a real GPU."""

from __future__ import annotations

from typing import Any

import pytest

from models.tuning.streaming import LayerWindow, decoder_layers, stream_layers

pytestmark = pytest.mark.integration

LAYERS = 6


def tiny_lora_model(seed: int = 0) -> Any:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = get_peft_model(
        LlamaForCausalLM(config), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"])
    )
    for name, param in model.named_parameters():  # peft starts B at zero; give every adapter weight a gradient
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.02)
    model.enable_input_require_grads()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model


def adapter_gradients(model: Any) -> dict[str, Any]:
    import torch

    ids = torch.arange(24).reshape(2, 12) % 128
    model(input_ids=ids, labels=ids).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("size", [1, 2, 3])
def test_streamed_layers_give_the_adapter_the_gradients_of_the_whole_model(size: int) -> None:
    import torch

    whole = adapter_gradients(tiny_lora_model())
    model = tiny_lora_model()
    window = stream_layers(model, "cpu", size)
    streamed = adapter_gradients(model)
    assert streamed.keys() == whole.keys() and len(whole) == 2 * LAYERS * 2
    for name, gradient in whole.items():
        assert torch.allclose(streamed[name], gradient, atol=1e-6), name
    assert window.most_resident <= size
    # Forward up the stack, then each layer again, top down, as the backward pass recomputes it.
    assert window.visits == list(range(LAYERS)) + list(reversed(range(LAYERS)))
    window.close()


def test_a_window_keeps_frozen_weights_out_of_the_device_set_and_the_adapter_in_it() -> None:
    model = tiny_lora_model()
    layers = decoder_layers(model)
    assert len(layers) == LAYERS
    window = stream_layers(model, "cpu", 2)
    frozen = [p for p in layers[0].parameters() if not p.requires_grad]
    trainable = [p for p in layers[0].parameters() if p.requires_grad]
    assert frozen and trainable
    # The Trainer and accelerate leave a model with a device map where it is.
    assert len(model.get_base_model().hf_device_map) > 1
    window.close()


def test_a_window_of_no_layers_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one layer"):
        LayerWindow([], "cpu", 0)
