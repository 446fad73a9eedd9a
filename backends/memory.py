"""How much memory a model needs, and whether that fits. Pure functions over model metadata."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from models.gguf import ModelInfo
from models.shared.wording import format_bytes as format_bytes  # sizes in words, for every layer

GIB = 1 << 30
MIB = 1 << 20
# Keep this much of the available memory free for the OS, the UI and the embedding model.
HEADROOM_BYTES = 512 * MIB
# Bytes per cached value for each context-cache type llama.cpp offers here: q8_0 keeps 32 values in 34 bytes,
# q4_0 in 18 (a scale and the quantized values).
KV_WIDTHS = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
F16 = KV_WIDTHS["f16"]


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    kv_cache_bytes: int
    compute_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.compute_bytes


def kv_cache_bytes(model: ModelInfo, context_length: int, bytes_per_element: float = F16) -> int:
    """K and V for every layer: layers x kv_heads x head_dim x context, at the cache type's width."""
    return model.block_count * kv_bytes_per_layer(model, context_length, bytes_per_element)


def kv_bytes_per_layer(model: ModelInfo, context_length: int, bytes_per_element: float = F16) -> int:
    values = model.head_count_kv * (model.head_dim_k + model.head_dim_v) * context_length
    return int(values * bytes_per_element)


def compute_buffer_bytes(model: ModelInfo, context_length: int, batch_tokens: int = 512) -> int:
    """llama.cpp's scratch for one batch, the largest set of tensors alive at once: the logits of the whole batch,
    or what attention keeps; plus a few activations. With flash attention, how Hearth creates every context,
    attention keeps only its mask (batch x context, f16), not the scores (heads x batch x context).
    Matches llama.cpp's own "compute buffer size" within a few percent (see tests/integration)."""
    logits = model.vocab_size * batch_tokens * 4
    attention = batch_tokens * context_length * 2
    activations = 3 * model.embedding_length * batch_tokens * 4
    return max(logits, attention) + activations


def estimate_llamacpp(model: ModelInfo, context_length: int, slots: int = 1, kv_width: float = F16) -> MemoryEstimate:
    """Everything on the CPU: the weights (mapped from the file), the whole KV cache, one compute buffer.

    Each of ``slots`` parallel answers has a KV cache of ``context_length`` tokens of its own. The compute
    buffer does not grow with them: a batch of 512 tokens is shared among the sequences, and each attends
    only over its own cache, so the attention scores stay heads x batch x one context."""
    return MemoryEstimate(
        weights_bytes=model.weights_bytes,
        kv_cache_bytes=kv_cache_bytes(model, context_length, kv_width) * slots,
        compute_bytes=compute_buffer_bytes(model, context_length),
    )


# OpenVINO's device plugin, compiled kernels and working buffers, measured here on the CPU device (the resident
# memory a SmolLM2 pipeline adds, less its weights and cache, is about 250 MiB at any context).
OPENVINO_RUNTIME_BYTES = 256 * MIB


def estimate_openvino(model: ModelInfo, context_length: int) -> MemoryEstimate:
    """OpenVINO keeps the GGUF's quantized weights (repacked for the device) and grows an F16 KV cache up to the
    context; the estimate is the full cache, as for llama.cpp, so a long conversation never runs out."""
    return MemoryEstimate(
        weights_bytes=model.weights_bytes,
        kv_cache_bytes=kv_cache_bytes(model, context_length),
        compute_bytes=OPENVINO_RUNTIME_BYTES,
    )


@dataclass(frozen=True)
class Offload:
    """Where llama.cpp's layers go: ``gpu_layers[i]`` repeating layers on GPU i, the rest on the CPU. The output
    projection goes to the last GPU only when every layer is offloaded (llama.cpp's n_gpu_layers = layers + 1)."""

    gpu_layers: tuple[int, ...]
    gpus: tuple[MemoryEstimate, ...]
    cpu: MemoryEstimate

    @property
    def offloaded(self) -> int:
        return sum(self.gpu_layers)


def estimate_offload(
    model: ModelInfo,
    context_length: int,
    gpu_layers: tuple[int, ...],
    slots: int = 1,
    kv_width: float = F16,
    output_here: bool = False,
) -> Offload:
    """Per-device memory for a layer placement as llama.cpp makes it: ``gpu_layers`` repeating layers on each GPU
    (or worker), in order, and the first layers on the CPU. With any layer offloaded, the output projection goes
    with the last ones (llama.cpp counts it as one more layer: :func:`llama_gpu_layers`), unless ``output_here``
    keeps it on the CPU. The token embedding lookup always stays on the CPU. A layer's KV cache lives with the
    layer, for every one of the ``slots`` parallel answers."""
    layers = _layer_sizes(model)
    kv_layer = kv_bytes_per_layer(model, context_length, kv_width) * slots
    compute = compute_buffer_bytes(model, context_length)
    offloaded = min(sum(gpu_layers), model.block_count)
    cpu_layers = model.block_count - offloaded
    output_away = offloaded > 0 and not output_here
    last = max((index for index, count in enumerate(gpu_layers) if count), default=-1)
    gpus: list[MemoryEstimate] = []
    start = cpu_layers
    for index, count in enumerate(gpu_layers):
        weights = sum(layers[start : start + count])
        start += count
        if output_away and index == last:
            weights += model.output_bytes
        gpus.append(MemoryEstimate(weights, kv_layer * count, compute if count else 0))
    cpu_weights = sum(layers[:cpu_layers]) + model.other_bytes
    if output_away and not model.output_tied:
        cpu_weights -= model.output_bytes  # its own tensor went; a tied one is the token embedding, which stays
    # the logits of a batch are the largest piece of the compute buffer, wherever the output projection runs
    cpu_compute = compute if cpu_layers or not offloaded or output_here else compute // 8
    return Offload(tuple(gpu_layers), tuple(gpus), MemoryEstimate(cpu_weights, kv_layer * cpu_layers, cpu_compute))


def llama_gpu_layers(offloaded: int, block_count: int) -> int:
    """llama.cpp's ``n_gpu_layers`` for ``offloaded`` repeating layers on GPUs or workers: it counts the output
    projection as the last layer, the first one it offloads (``n_gpu_layers=1`` offloads it alone, and ``k`` the
    output and ``k - 1`` layers), so the output goes with them as :func:`estimate_offload` counts it."""
    offloaded = min(max(offloaded, 0), block_count)
    return offloaded + 1 if offloaded else 0


def _layer_sizes(model: ModelInfo) -> tuple[int, ...]:
    """Weight bytes per repeating layer; an even share of the weights when the tensor table did not say."""
    return model.layer_bytes or (model.weights_bytes // max(model.block_count, 1),) * model.block_count


def usable_bytes(available_bytes: int, headroom_bytes: int = HEADROOM_BYTES) -> int:
    return max(available_bytes - headroom_bytes, 0)


def layers_that_fit(
    model: ModelInfo,
    context_length: int,
    free_bytes: int,
    first_layer: int = 0,
    slots: int = 1,
    kv_width: float = F16,
    with_output: bool = False,
) -> int:
    """How many consecutive layers from ``first_layer`` fit in ``free_bytes`` with their KV cache (for each of
    ``slots`` answers) and a compute buffer; ``with_output``: beside the output projection, which llama.cpp puts on
    the device holding the last offloaded layers (see :func:`estimate_offload`)."""
    layers = _layer_sizes(model)
    room = free_bytes - compute_buffer_bytes(model, context_length) - (model.output_bytes if with_output else 0)
    kv_layer = kv_bytes_per_layer(model, context_length, kv_width) * slots
    count = 0
    for size in layers[first_layer:]:
        if room < size + kv_layer:
            break
        room -= size + kv_layer
        count += 1
    return count


def split_layers(block_count: int, capacities: tuple[int, ...]) -> tuple[int, ...]:
    """Layers per device in proportion to what each can hold (largest remainders), never above a capacity.
    Returns counts summing to ``block_count``, or fewer if the capacities cannot hold them all."""
    return weighted_split(block_count, capacities, tuple(float(c) for c in capacities))


def weighted_split(block_count: int, capacities: tuple[int, ...], weights: tuple[float, ...]) -> tuple[int, ...]:
    """Layers per device in proportion to ``weights`` (each device's speed, say), never above its capacity: a device
    that its share would overfill holds what it can, and the others share the rest by their weights again. Whole
    layers by largest remainders. Counts sum to ``block_count``, or to what the capacities hold if less."""
    counts = [0] * len(capacities)
    remaining = min(block_count, sum(max(c, 0) for c in capacities))
    open_ = [i for i, c in enumerate(capacities) if c > 0 and weights[i] > 0]
    while remaining > 0 and open_:
        total = sum(weights[i] for i in open_)
        shares = {i: remaining * weights[i] / total for i in open_}
        full = [i for i in open_ if shares[i] >= capacities[i] - counts[i]]
        if not full:
            break
        for i in full:
            remaining -= capacities[i] - counts[i]
            counts[i] = capacities[i]
        open_ = [i for i in open_ if i not in full]
    if remaining > 0 and open_:
        total = sum(weights[i] for i in open_)
        shares = {i: remaining * weights[i] / total for i in open_}
        for i in open_:
            counts[i] += int(shares[i])
        left = remaining - sum(int(share) for share in shares.values())
        for i in sorted(open_, key=lambda i: shares[i] - int(shares[i]), reverse=True)[:left]:
            counts[i] += 1
    return tuple(counts)


def largest_context(model: ModelInfo, fits: Callable[[int], bool], upper: int) -> int:
    """The largest context (a multiple of 256, at least 256) for which ``fits`` holds, or 0 if none does."""
    low, high, best = 1, upper // 256, 0
    while low <= high:
        middle = (low + high) // 2
        if fits(middle * 256):
            best, low = middle * 256, middle + 1
        else:
            high = middle - 1
    return best
