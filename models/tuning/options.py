"""A tuning run's settings, its two presets, and the checks that keep nonsense from reaching the trainer."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from models.shared.errors import TuningError

Preset = Literal["quick", "standard"]
Device = Literal["auto", "cpu", "gpu"]
# The linear layers a LoRA can adapt, by their names in transformers (llama, qwen2, qwen3, gemma3 share them).
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")
ALL_TARGETS = ATTENTION + MLP
MAX_RANK = 512
MAX_LENGTH = 32_768


@dataclass(frozen=True)
class TuneOptions:
    rank: int = 16
    alpha: int = 32  # the adapter's output is scaled by alpha / rank
    targets: tuple[str, ...] = ALL_TARGETS
    learning_rate: float = 5e-4
    epochs: float = 3.0
    max_steps: int | None = None  # when set, the run stops after this many steps whatever the epochs say
    max_length: int = 512  # tokens per example; longer ones are cut (and counted)
    batch_size: int = 4
    gradient_checkpointing: bool = False  # less memory for activations, about a third more time
    seed: int = 0
    save_every: int = 10  # steps between checkpoints (a killed run resumes from the last one)
    device: Device = "auto"  # auto: an NVIDIA GPU when the run fits there (streaming layers if need be), else the CPU
    gpu_memory_mib: int | None = None  # at most this much GPU memory, to leave room for chat on the same GPU

    def describe(self) -> str:
        length = f"{self.max_steps} steps" if self.max_steps else f"{self.epochs:g} epochs"
        return (
            f"rank {self.rank}, alpha {self.alpha}, {layers_in_words(self.targets)}, "
            f"learning rate {self.learning_rate:g}, "
            f"{length}, batch {self.batch_size}, max length {self.max_length}"
            + (", gradient checkpointing" if self.gradient_checkpointing else "")
            + (f", on the {self.device.upper()}" if self.device != "auto" else "")
            + (f", at most {self.gpu_memory_mib} MiB of GPU memory" if self.gpu_memory_mib else "")
        )


def layers_in_words(targets: tuple[str, ...]) -> str:
    """The adapted layers as a person reads them: "attention layers", "every layer", else their names."""
    if set(targets) == set(ALL_TARGETS):
        return "every layer"
    if set(targets) == set(ATTENTION):
        return "attention layers"
    if set(targets) == set(MLP):
        return "feed-forward layers"
    return ", ".join(targets)


PRESETS: dict[Preset, TuneOptions] = {
    # A first look in minutes that shows: a small adapter on every layer, learning fast, three passes over the data.
    # On a dozen examples of a style it taught the style to every held-out question where one pass on the attention
    # layers at 1e-3 taught it to none (bench/tuning_presets.py, bench/data/tuning-presets.*.json).
    "quick": TuneOptions(rank=8, alpha=16, targets=ALL_TARGETS, learning_rate=2e-3, epochs=3.0),
    "standard": TuneOptions(),
}


def preset(name: Preset, **changes: object) -> TuneOptions:
    """A preset with some settings changed (``None`` values leave the preset's)."""
    chosen = {key: value for key, value in changes.items() if value is not None}
    return check_options(replace(PRESETS[name], **chosen))  # type: ignore[arg-type]


def check_options(options: TuneOptions) -> TuneOptions:
    """``options`` unchanged, or :class:`TuningError` naming the first setting out of range and a usual value."""
    if not 1 <= options.rank <= MAX_RANK:
        raise TuningError(f"A rank of {options.rank} is out of range.", f"Use 1 to {MAX_RANK}; 8 to 64 is usual.")
    if not 1 <= options.alpha <= 4 * MAX_RANK:
        raise TuningError(f"An alpha of {options.alpha} is out of range.", "Use a whole number, often twice the rank.")
    if not (math.isfinite(options.learning_rate) and 0 < options.learning_rate <= 0.1):
        raise TuningError(
            f"A learning rate of {options.learning_rate} is not usable.",
            "Use a positive number up to 0.1; 0.0001 to 0.001 is usual for LoRA.",
        )
    if not (math.isfinite(options.epochs) and 0 < options.epochs <= 100):
        raise TuningError(f"{options.epochs} epochs is out of range.", "Use more than 0 and at most 100.")
    if options.max_steps is not None and not 1 <= options.max_steps <= 1_000_000:
        raise TuningError(f"{options.max_steps} steps is out of range.", "Use 1 or more.")
    if not 16 <= options.max_length <= MAX_LENGTH:
        raise TuningError(
            f"A max length of {options.max_length} tokens is out of range.", f"Use 16 to {MAX_LENGTH}; 512 is usual."
        )
    if not 1 <= options.batch_size <= 256:
        raise TuningError(f"A batch of {options.batch_size} is out of range.", "Use 1 to 256; 4 is usual.")
    if not options.targets:
        raise TuningError("No layers to adapt were chosen.", f"Pick some of {', '.join(ALL_TARGETS)}.")
    unknown = [t for t in options.targets if t not in ALL_TARGETS]
    if unknown:
        raise TuningError(f"Unknown layer names: {', '.join(unknown)}.", f"Pick from {', '.join(ALL_TARGETS)}.")
    if options.device not in ("auto", "cpu", "gpu"):
        raise TuningError(f"Unknown device {options.device!r}.", "Use auto, cpu or gpu.")
    if options.gpu_memory_mib is not None and not 128 <= options.gpu_memory_mib <= 1 << 24:
        raise TuningError(
            f"A GPU memory cap of {options.gpu_memory_mib} MiB is out of range.", "Use 128 MiB or more, or no cap."
        )
    if options.save_every < 1:
        raise TuningError("Checkpoints must be at least one step apart.", "Use 1 or more.")
    return options


def total_steps(options: TuneOptions, train_examples: int) -> int:
    """Optimizer steps the run takes (the last batch of an epoch may be short)."""
    if options.max_steps is not None:
        return options.max_steps
    per_epoch = math.ceil(train_examples / options.batch_size)
    return max(1, math.ceil(per_epoch * options.epochs))
