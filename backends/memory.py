"""How much memory a model needs, and whether that fits. Pure functions over model metadata."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import DoesNotFit
from models.gguf import ModelInfo

GIB = 1 << 30
MIB = 1 << 20
# Keep this much of the available memory free for the OS, the UI and the embedding model.
HEADROOM_BYTES = 512 * MIB


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    kv_cache_bytes: int
    compute_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.compute_bytes


def kv_cache_bytes(model: ModelInfo, context_length: int, bytes_per_element: int = 2) -> int:
    """K and V for every layer: layers x kv_heads x head_dim x context, at the cache type's width (F16)."""
    per_token = model.block_count * model.head_count_kv * (model.head_dim_k + model.head_dim_v)
    return per_token * context_length * bytes_per_element


def compute_buffer_bytes(model: ModelInfo, context_length: int, batch_tokens: int = 512) -> int:
    """llama.cpp's scratch for one batch: logits for the batch plus activations and attention scores."""
    logits = model.vocab_size * batch_tokens * 4
    activations = model.embedding_length * batch_tokens * 4 * 8
    attention = model.head_count * batch_tokens * context_length * 4 // 8
    return logits + activations + attention


def estimate_llamacpp(model: ModelInfo, context_length: int) -> MemoryEstimate:
    return MemoryEstimate(
        weights_bytes=model.file_size_bytes,
        kv_cache_bytes=kv_cache_bytes(model, context_length),
        compute_bytes=compute_buffer_bytes(model, context_length),
    )


def check_fits(estimate: MemoryEstimate, available_bytes: int, what: str) -> None:
    """Raise :class:`DoesNotFit` when ``estimate`` needs more than ``available_bytes`` (less headroom)."""
    usable = max(available_bytes - HEADROOM_BYTES, 0)
    if estimate.total_bytes <= usable:
        return
    raise DoesNotFit(
        f"{what} needs about {format_bytes(estimate.total_bytes)} "
        f"(weights {format_bytes(estimate.weights_bytes)}, context cache {format_bytes(estimate.kv_cache_bytes)})"
        f" but only {format_bytes(available_bytes)} of memory is available.",
        "Lower the context length (--context or HEARTH_MODEL__CONTEXT_LENGTH), close other programs, "
        "or choose a smaller or lower-bit model.",
    )


def format_bytes(n_bytes: int) -> str:
    if n_bytes >= GIB:
        return f"{n_bytes / GIB:.1f} GiB"
    return f"{n_bytes / MIB:.0f} MiB"
