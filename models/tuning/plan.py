"""How much memory a tuning run needs, before it starts: pure arithmetic over the model's shapes and the run's
settings, with constants measured on this project's machines (peak RSS of the training process; see
``tests/integration/test_tuning_memory.py``).

The parts: the weights, dequantized to 32-bit floats; the adapter with its gradients and AdamW's two moments;
the activations kept for the backward pass, per token of a batch (far fewer with gradient checkpointing, which
recomputes them layer by layer); the logits over the vocabulary and their gradient; and the Python runtime with
torch and transformers loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from models.shared.errors import DoesNotFit
from models.shared.wording import format_bytes
from models.tuning.lora_gguf import GGUF_TARGETS
from models.tuning.options import TuneOptions

FLOAT_BYTES = 4
# The training process with torch, transformers and peft imported and nothing loaded (measured: 0.55-0.6 GB).
RUNTIME_BYTES = 600 << 20
# Activations kept per token and layer, in floats: per unit of the hidden and feed-forward widths, and per head and
# position attended to (the attention weights grow with the length of the sequence). Fitted to the peak RSS of
# six runs of SmolLM2-135M and Qwen2.5-0.5B (59 to 1,024 tokens per batch): every one within 7%.
ACTIVATION_FLOATS_PER_HIDDEN = 4
ACTIVATION_FLOATS_PER_FFN = 4
ATTENTION_FLOATS_PER_HEAD_AND_POSITION = 2
# With gradient checkpointing each layer keeps its input (and a little more); one layer's full activations live
# at a time (measured: within 3% on SmolLM2-135M, 1,024 tokens per batch).
CHECKPOINTED_FLOATS_PER_HIDDEN = 4
# Recomputing layers in the backward pass allocates and frees activations over and over; glibc's heap does not
# hand all of it back, and the peak RSS runs above the live tensors, the more so the larger the batch (measured on
# SmolLM2-135M with 1,024 tokens per batch: 2.43-2.65 GiB here, 2.9 GiB on a CI runner, against 2.24 GiB planned
# without this slack; 512 tokens per batch: within 10% without it). The activations of a checkpointed run are
# planned this much larger.
CHECKPOINTED_HEAP_SLACK = 1.35
# Logits over the vocabulary, their copies for the loss, and their gradients.
LOGIT_COPIES = 4
# On a GPU the logits come out of the model in bfloat16 and are raised to float32 for the loss: bytes per token
# and vocabulary entry for the logits, their float copy and both gradients.
GPU_LOGIT_BYTES = 12
# The CUDA libraries' workspaces (cuBLAS), allocated through torch: the measured peaks of SmolLM2-135M on an H200
# ran 40 MiB above the plan without them, whole or streamed.
GPU_RUNTIME_BYTES = 40 << 20


@dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a model, read from its GGUF tensors."""

    parameters: int
    layers: int
    hidden: int
    ffn: int
    vocab: int
    heads: int
    projections: Mapping[str, tuple[int, int]]  # target -> (in, out) of one layer's weight


@dataclass(frozen=True)
class TrainingPlan:
    weights_bytes: int
    adapter_bytes: int  # adapter, gradients and optimizer state
    activation_bytes: int
    runtime_bytes: int
    adapter_parameters: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.adapter_bytes + self.activation_bytes + self.runtime_bytes

    def describe(self) -> str:
        return (
            f"{format_bytes(self.total_bytes)}: weights {format_bytes(self.weights_bytes)}, adapter and optimizer "
            f"{format_bytes(self.adapter_bytes)} ({self.adapter_parameters / 1e6:.1f} M parameters), activations "
            f"{format_bytes(self.activation_bytes)}, runtime {format_bytes(self.runtime_bytes)}"
        )


def model_shape(
    tensors: Iterable[tuple[str, tuple[int, ...]]], parameters: int, layers: int, vocab: int, heads: int
) -> ModelShape:
    """The shape from GGUF tensor (name, ggml shape) pairs: ggml lists a weight's input width first."""
    first_layer = {name: shape for name, shape in tensors if name.startswith("blk.0.")}
    projections: dict[str, tuple[int, int]] = {}
    for target, gguf_name in GGUF_TARGETS.items():  # llama.cpp's name of each target's weights
        shape = first_layer.get(f"blk.0.{gguf_name}.weight", ())
        if len(shape) == 2:
            projections[target] = (int(shape[0]), int(shape[1]))
    hidden = projections.get("q_proj", (0, 0))[0]
    ffn = projections.get("up_proj", (0, 0))[1]
    return ModelShape(parameters, layers, hidden, ffn, vocab, heads, projections)


def plan_training(shape: ModelShape, options: TuneOptions, batch_size: int, longest: int) -> TrainingPlan:
    """Peak memory (RSS) of a run on the CPU whose batches hold ``batch_size`` sequences of up to ``longest``
    tokens."""
    adapter_parameters = _adapter_parameters(shape, options)
    kept = _kept_floats_per_token(shape, options, longest)
    activations = batch_size * longest * (kept + LOGIT_COPIES * shape.vocab) * FLOAT_BYTES
    if options.gradient_checkpointing:
        activations = int(activations * CHECKPOINTED_HEAP_SLACK)
    return TrainingPlan(
        weights_bytes=shape.parameters * FLOAT_BYTES,
        adapter_bytes=adapter_parameters * 4 * FLOAT_BYTES,
        activation_bytes=activations,
        runtime_bytes=RUNTIME_BYTES,
        adapter_parameters=adapter_parameters,
    )


def plan_gpu_training(
    shape: ModelShape, options: TuneOptions, batch_size: int, longest: int, weight_bytes: int, window: int | None
) -> TrainingPlan:
    """Peak GPU memory (what torch allocates) of a run on a GPU, with the weights and activations held in
    ``weight_bytes`` per value (2 for bfloat16) and, when ``window`` is set, only that many decoder layers' weights
    on the GPU at a time (the rest streamed from host memory; gradient checkpointing is then on)."""
    adapter_parameters = _adapter_parameters(shape, options)
    layers_on_gpu = shape.layers if window is None else min(window, shape.layers)
    on_gpu_parameters = shape.parameters - (shape.layers - layers_on_gpu) * layer_parameters(shape)
    kept = _kept_floats_per_token(shape, options, longest)
    activations = batch_size * longest * (kept * weight_bytes + GPU_LOGIT_BYTES * shape.vocab)
    return TrainingPlan(
        weights_bytes=on_gpu_parameters * weight_bytes,
        adapter_bytes=adapter_parameters * 4 * FLOAT_BYTES,
        activation_bytes=activations,
        runtime_bytes=GPU_RUNTIME_BYTES,
        adapter_parameters=adapter_parameters,
    )


def plan_loading(shape: ModelShape) -> TrainingPlan:
    """Host memory of a run that trains on a GPU: transformers reads the whole model in float32 before casting and
    moving it."""
    return TrainingPlan(shape.parameters * FLOAT_BYTES, 0, 0, RUNTIME_BYTES, 0)


def layer_parameters(shape: ModelShape) -> int:
    """The weights of one decoder layer: its projections and its two norms."""
    return sum(i * o for i, o in shape.projections.values()) + 2 * shape.hidden


def _adapter_parameters(shape: ModelShape, options: TuneOptions) -> int:
    per_layer = sum(options.rank * (i + o) for t, (i, o) in shape.projections.items() if t in options.targets)
    return per_layer * shape.layers


def _kept_floats_per_token(shape: ModelShape, options: TuneOptions, longest: int) -> int:
    """Values the layers keep for the backward pass, per token of a batch."""
    one_layer = (
        ACTIVATION_FLOATS_PER_HIDDEN * shape.hidden
        + ACTIVATION_FLOATS_PER_FFN * shape.ffn
        + ATTENTION_FLOATS_PER_HEAD_AND_POSITION * shape.heads * longest
    )
    if options.gradient_checkpointing:
        return CHECKPOINTED_FLOATS_PER_HIDDEN * shape.hidden * shape.layers + one_layer
    return one_layer * shape.layers


def check_fits(plan: TrainingPlan, options: TuneOptions, available_bytes: int, longest: int) -> None:
    """Raise :class:`DoesNotFit` naming what would make the run fit, when it would not."""
    if plan.total_bytes <= available_bytes:
        return
    hints: list[str] = []
    if plan.activation_bytes > plan.total_bytes // 4:
        if not options.gradient_checkpointing:
            hints.append("turn on gradient checkpointing")
        if options.batch_size > 1:
            hints.append("use a smaller batch")
        if longest > 128:
            hints.append(f"use a shorter max length (now {min(longest, options.max_length)} tokens)")
    if plan.adapter_bytes > plan.total_bytes // 8 and options.rank > 4:
        hints.append("use a smaller rank")
    hints.append("tune a smaller model")
    raise DoesNotFit(
        f"This run needs about {format_bytes(plan.total_bytes)} and {format_bytes(available_bytes)} is free "
        f"({plan.describe()}).",
        "To make it fit: " + "; or ".join(hints) + ".",
    )
