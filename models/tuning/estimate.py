"""How long a tuning run will take, known before anything loads: the page's check answers in seconds instead of
loading the model to time real steps (loading alone took 50 s for Qwen2.5-Coder-1.5B here).

A LoRA step on the CPU is matrix products: forward through the frozen weights (2 floating-point operations per
parameter and token), backward to the activations (2 more; the frozen weights need no gradients), so about 4 x
parameters x tokens. Divided by what this CPU does in plain matrix products, times ``EFFICIENCY``, plus
``STEP_OVERHEAD_S`` (the optimizer and the rest of a step, which a small model makes visible), that is the step's
time. Loading dequantizes the GGUF into full precision: ``LOAD_FIXED_S`` plus ``LOAD_S_PER_BILLION`` per
billion parameters. The constants were fitted on this project's 2-core machine to SmolLM2-135M and
Qwen2.5-Coder-1.5B (``bench/tuning_presets.py --calibrate``, ``bench/data/tuning-estimate.*.json``). That machine
is shared and its matrix-product speed reads differently from run to run, so an estimate is good to about a
quarter either way: in the recorded runs it said 0.79x and 0.81x of the measured step time and 0.94x and 1.10x of
the load. A pace measured by an earlier run of the same model on this computer replaces the arithmetic when there
is one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

FLOPS_PER_PARAMETER_TOKEN = 4.0
EFFICIENCY = 0.95  # training's operations per second over plain 1024 x 1024 products' (fitted to both models)
STEP_OVERHEAD_S = 0.35  # per step, whatever the model (fitted to both models)
LOAD_FIXED_S = 12.0  # starting Python, torch, transformers and peft
LOAD_S_PER_BILLION = 24.0  # dequantizing the GGUF into full-precision tensors

Source = Literal["arithmetic", "earlier run"]


@dataclass(frozen=True)
class TimeEstimate:
    load_s: float
    step_s: float
    steps: int
    tokens_per_s: float
    source: Source

    @property
    def total_s(self) -> float:
        return self.load_s + self.step_s * self.steps


def tokens_per_step(train_tokens: int, train_examples: int, batch_size: int) -> float:
    """The tokens one step trains on, on average (an epoch is ``ceil(examples / batch)`` steps)."""
    steps_per_epoch = max(1, math.ceil(train_examples / max(1, batch_size)))
    return train_tokens / steps_per_epoch


def load_seconds(parameters: int) -> float:
    return LOAD_FIXED_S + LOAD_S_PER_BILLION * parameters / 1e9


def from_arithmetic(parameters: int, step_tokens: float, steps: int, matmul_flops: float) -> TimeEstimate:
    """The run's time from this CPU's speed at plain matrix products (operations per second)."""
    computing = matmul_flops * EFFICIENCY / (FLOPS_PER_PARAMETER_TOKEN * max(1, parameters))
    step_s = STEP_OVERHEAD_S + step_tokens / computing
    tokens_per_s = step_tokens / step_s if step_s else computing
    return TimeEstimate(load_seconds(parameters), step_s, steps, tokens_per_s, "arithmetic")


def from_pace(parameters: int, step_tokens: float, steps: int, tokens_per_s: float) -> TimeEstimate:
    """The run's time at the pace an earlier run of the same model kept on this computer."""
    return TimeEstimate(load_seconds(parameters), step_tokens / tokens_per_s, steps, tokens_per_s, "earlier run")
