"""Where a tuning run trains, decided before the model loads (pure): on the GPU with every layer there, on the GPU
with the decoder layers streamed from host memory through a window of them, or on the CPU.

The order of preference on a GPU: the run as asked; the same with gradient checkpointing (activations shrink,
the weights stay); then streaming, with as many layers in the window as fit. A GPU that cannot hold even a
window of two layers leaves the run to the CPU, unless the GPU was asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from models.shared.errors import DoesNotFit
from models.shared.wording import format_bytes
from models.tuning.options import TuneOptions
from models.tuning.plan import ModelShape, TrainingPlan, layer_parameters, plan_gpu_training, plan_training

# Of the GPU memory free when the run starts, this share is planned for; the rest absorbs the allocator's
# fragmentation and the CUDA libraries' workspaces.
GPU_USABLE_SHARE = 0.9
# A window needs two layers: the one computing and the next one arriving.
SMALLEST_WINDOW = 2


@dataclass(frozen=True)
class GpuRoom:
    """What the training process found on its GPU."""

    name: str
    free_bytes: int  # free now, less any cap the user set
    bf16: bool  # whether the GPU computes in bfloat16

    @property
    def usable_bytes(self) -> int:
        return int(self.free_bytes * GPU_USABLE_SHARE)

    @classmethod
    def capped(cls, name: str, free_bytes: int, bf16: bool, cap_mib: int | None) -> GpuRoom:
        """The room of a GPU with ``free_bytes`` free, held to the user's ``cap_mib`` (``--gpu-memory``) if set."""
        return cls(name, min(free_bytes, cap_mib << 20) if cap_mib else free_bytes, bf16)


@dataclass(frozen=True)
class Placement:
    where: Literal["cpu", "gpu"]
    plan: TrainingPlan
    layers: int
    gradient_checkpointing: bool
    dtype: Literal["float32", "bfloat16"] = "float32"
    window: int | None = None  # decoder layers on the GPU at a time, when streaming
    gpu_name: str = ""
    gpu_free_bytes: int = 0
    note: str = ""  # why a GPU went unused, or what was changed to fit

    def describe(self) -> str:
        if self.where == "cpu":
            return "on the CPU" + (f" ({self.note})" if self.note else "")
        layers = (
            f"all {self.layers} layers on the GPU"
            if self.window is None
            else f"{self.window} of {self.layers} layers on the GPU at a time, streamed from memory"
        )
        extra = f"; {self.note}" if self.note else ""
        return f"on {self.gpu_name} ({self.dtype}, {layers}{extra})"


def choose_placement(
    shape: ModelShape,
    options: TuneOptions,
    longest: int,
    room: GpuRoom | None,
    device: Literal["auto", "cpu", "gpu"] = "auto",
) -> Placement:
    """Where to train; :class:`DoesNotFit` when the GPU was asked for and cannot hold even a window of layers."""
    batch = options.batch_size
    cpu_plan = plan_training(shape, options, batch, longest)
    on_cpu = Placement("cpu", cpu_plan, shape.layers, options.gradient_checkpointing)
    if device == "cpu" or room is None:
        return on_cpu
    dtype: Literal["float32", "bfloat16"] = "bfloat16" if room.bf16 else "float32"
    value_bytes = 2 if room.bf16 else 4
    for checkpointing in dict.fromkeys((options.gradient_checkpointing, True)):
        plan = plan_gpu_training(
            shape, replace(options, gradient_checkpointing=checkpointing), batch, longest, value_bytes, None
        )
        if plan.total_bytes <= room.usable_bytes:
            note = "" if checkpointing == options.gradient_checkpointing else "gradient checkpointing turned on to fit"
            return Placement("gpu", plan, shape.layers, checkpointing, dtype, None, room.name, room.free_bytes, note)
    checkpointed = replace(options, gradient_checkpointing=True)
    smallest = plan_gpu_training(shape, checkpointed, batch, longest, value_bytes, SMALLEST_WINDOW)
    if smallest.total_bytes <= room.usable_bytes:
        per_layer = layer_parameters(shape) * value_bytes
        window = SMALLEST_WINDOW + (room.usable_bytes - smallest.total_bytes) // max(1, per_layer)
        window = int(min(window, shape.layers - 1))
        plan = plan_gpu_training(shape, checkpointed, batch, longest, value_bytes, window)
        return Placement("gpu", plan, shape.layers, True, dtype, window, room.name, room.free_bytes)
    if device == "gpu":
        raise DoesNotFit(
            f"Even {SMALLEST_WINDOW} layers at a time do not fit on {room.name}: the run needs about "
            f"{format_bytes(smallest.total_bytes)} of GPU memory and {format_bytes(room.usable_bytes)} is usable "
            f"({smallest.describe()}).",
            "Free GPU memory (unload the chat model from the GPU), use a shorter max length or a smaller batch, "
            "or train on the CPU.",
        )
    return replace(on_cpu, note=f"{room.name} has too little free memory: {format_bytes(room.free_bytes)}")
