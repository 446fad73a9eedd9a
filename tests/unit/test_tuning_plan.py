"""The tuning memory plan as arithmetic: what each setting changes, and the remedies of a run that does not fit.
(How close the plan comes to a real run's peak RSS: ``tests/integration/test_tuning_memory.py``.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.shared.errors import DoesNotFit
from models.tuning.options import TuneOptions
from models.tuning.plan import ModelShape, check_fits, plan_training

# SmolLM2-135M's shapes (30 layers, hidden 576, feed-forward 1,536, 9 heads, 49,152 tokens).
SMOL = ModelShape(
    parameters=134_515_008,
    layers=30,
    hidden=576,
    ffn=1536,
    vocab=49152,
    heads=9,
    projections={
        "q_proj": (576, 576),
        "k_proj": (576, 192),
        "v_proj": (576, 192),
        "o_proj": (576, 576),
        "gate_proj": (576, 1536),
        "up_proj": (576, 1536),
        "down_proj": (1536, 576),
    },
)
OPTIONS = TuneOptions(rank=16, alpha=32, batch_size=2, max_length=512)


def test_the_adapter_counts_rank_times_both_widths_of_each_target_in_every_layer() -> None:
    plan = plan_training(SMOL, replace(OPTIONS, targets=("q_proj", "v_proj")), 2, 512)
    assert plan.adapter_parameters == 30 * 16 * ((576 + 576) + (576 + 192))
    assert plan.adapter_bytes == plan.adapter_parameters * 4 * 4  # weights, gradients, two AdamW moments


def test_gradient_checkpointing_plans_fewer_activations_and_the_same_weights() -> None:
    plain = plan_training(SMOL, OPTIONS, 2, 512)
    checkpointed = plan_training(SMOL, replace(OPTIONS, gradient_checkpointing=True), 2, 512)
    assert checkpointed.weights_bytes == plain.weights_bytes == SMOL.parameters * 4
    assert checkpointed.activation_bytes < plain.activation_bytes * 0.6


@pytest.mark.parametrize("checkpointing", [False, True])
def test_activations_grow_with_the_batch_and_faster_than_linearly_with_the_length(checkpointing: bool) -> None:
    options = replace(OPTIONS, gradient_checkpointing=checkpointing)
    one, two = (plan_training(SMOL, options, batch, 256).activation_bytes for batch in (1, 2))
    assert two == pytest.approx(2 * one, rel=1e-6)
    short, long = (plan_training(SMOL, options, 1, length).activation_bytes for length in (256, 512))
    assert long > 2 * short  # attention weights grow with the square of the length


def test_a_run_that_fits_passes() -> None:
    plan = plan_training(SMOL, OPTIONS, 2, 512)
    check_fits(plan, OPTIONS, plan.total_bytes, 512)


def test_a_run_that_does_not_fit_names_what_would_make_it_fit() -> None:
    plan = plan_training(SMOL, OPTIONS, 2, 512)
    with pytest.raises(DoesNotFit) as raised:
        check_fits(plan, OPTIONS, plan.total_bytes // 2, 512)
    remedy = raised.value.remedy
    assert "gradient checkpointing" in remedy
    assert "smaller batch" in remedy
    assert "shorter max length (now 512 tokens)" in remedy
    assert remedy.endswith("tune a smaller model.")
    assert "free" in raised.value.message


def test_with_checkpointing_on_and_one_short_sequence_only_a_smaller_model_is_left() -> None:
    options = replace(OPTIONS, gradient_checkpointing=True, batch_size=1, rank=4)
    plan = plan_training(SMOL, options, 1, 64)
    with pytest.raises(DoesNotFit) as raised:
        check_fits(plan, options, plan.total_bytes // 2, 64)
    assert raised.value.remedy == "To make it fit: tune a smaller model."
