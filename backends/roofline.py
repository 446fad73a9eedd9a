"""How close decoding gets to this machine's limit. Writing one token reads every weight a layer or the output
projection uses, once, and the context cache so far: at a memory read bandwidth of B bytes/s no engine can write
more than B / (those bytes) tokens a second on a CPU. Pure: model facts and measurements in, figures out."""

from __future__ import annotations

from backends.memory import F16, kv_cache_bytes
from models.gguf import ModelInfo


def bytes_per_token(model: ModelInfo, context_used: int, kv_width: float = F16) -> int:
    """The bytes one decoding step reads: the layers' weights, the output projection (the token embedding is only
    looked up, one row, unless the output reuses it), and the cache of the ``context_used`` tokens before it."""
    layers = sum(model.layer_bytes) if model.layer_bytes else model.weights_bytes - model.other_bytes
    return layers + model.output_bytes + kv_cache_bytes(model, context_used, kv_width)


def ceiling_tokens_per_s(bandwidth_bytes_per_s: float, step_bytes: int) -> float:
    return bandwidth_bytes_per_s / step_bytes if step_bytes > 0 else 0.0


def share_of_ceiling(tokens_per_s: float, bandwidth_bytes_per_s: float, step_bytes: int) -> float:
    ceiling = ceiling_tokens_per_s(bandwidth_bytes_per_s, step_bytes)
    return tokens_per_s / ceiling if ceiling > 0 else 0.0
