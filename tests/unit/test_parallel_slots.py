"""Parallel answers ("slots"), the pure parts: the memory they cost, how selection plans them and says so,
which slot a request takes, how a step's tokens are shared, and each answer's sampler chain."""

from __future__ import annotations

import pytest

from app.cli.main import settings_overrides
from app.cli.parser import build_parser
from app.services.container import preferences
from app.settings import load_settings
from backends.base import GenerationParams
from backends.llamacpp.batch_policy import (
    ANY_ADAPTER,
    FreeSlot,
    SlotChoice,
    admissible,
    choose_slot,
    common_prefix,
    gap_moves,
    prefill_shares,
    prefix_donor,
)
from backends.llamacpp.sampling import SamplerStep, sampler_steps
from backends.memory import GIB, HEADROOM_BYTES, estimate_llamacpp, estimate_offload, layers_that_fit
from backends.placement import GPU_HEADROOM_BYTES, slot_counts
from models.shared.errors import HearthError
from tests.helpers import make_inventory
from tests.unit.test_selection_fixtures import CORE_ULTRA, LLAMA_7B, SMALL, plan_for, said

# --- memory -------------------------------------------------------------------------------------------------


def test_each_slot_has_a_kv_cache_of_its_own_and_the_compute_buffer_is_shared() -> None:
    one, four = estimate_llamacpp(SMALL, 4096), estimate_llamacpp(SMALL, 4096, slots=4)
    assert four.kv_cache_bytes == 4 * one.kv_cache_bytes > 0
    assert four.weights_bytes == one.weights_bytes
    assert four.compute_bytes == one.compute_bytes


def test_offloaded_layers_carry_every_slots_cache() -> None:
    one = estimate_offload(LLAMA_7B, 4096, (20,))
    three = estimate_offload(LLAMA_7B, 4096, (20,), slots=3)
    assert three.gpus[0].kv_cache_bytes == 3 * one.gpus[0].kv_cache_bytes
    assert three.cpu.kv_cache_bytes == 3 * one.cpu.kv_cache_bytes
    free = 8 * GIB
    assert layers_that_fit(LLAMA_7B, 4096, free, slots=4) < layers_that_fit(LLAMA_7B, 4096, free)


# --- selection ----------------------------------------------------------------------------------------------


def test_slot_counts_halve_down_to_one() -> None:
    assert slot_counts(4) == [4, 2, 1]
    assert slot_counts(6) == [6, 3, 1]
    assert slot_counts(1) == [1]
    assert slot_counts(0) == [1]


def test_llamacpp_plans_the_slots_asked_for_and_says_so() -> None:
    plan = plan_for(SMALL, make_inventory(ram_available_gib=16), slots=4, context_length=2048)
    assert (plan.backend, plan.slots) == ("llamacpp", 4)
    assert plan.load_options().slots == 4
    assert plan.memory.kv_cache_bytes == estimate_llamacpp(SMALL, 2048, slots=4).kv_cache_bytes
    assert said(plan, "4 parallel answers of 2048 tokens each")


def test_one_slot_is_one_answer_at_a_time() -> None:
    plan = plan_for(SMALL, make_inventory(), slots=1)
    assert plan.slots == 1
    assert said(plan, "one answer at a time, as configured")


def test_fewer_slots_when_the_asked_for_ones_do_not_fit_in_ram() -> None:
    def need(slots: int) -> int:
        return estimate_llamacpp(LLAMA_7B, 4096, slots).total_bytes + HEADROOM_BYTES

    between = (need(2) + need(4)) / 2 / GIB  # two caches fit, four do not
    plan = plan_for(LLAMA_7B, make_inventory(ram_available_gib=between), slots=4)
    assert (plan.backend, plan.device, plan.slots) == ("llamacpp", "CPU", 2)
    assert said(plan, "2 parallel answers of 4096 tokens each")
    assert said(plan, "4 were asked for, but more would not fit in memory")


def test_the_whole_model_on_a_gpu_beats_more_slots_half_on_it() -> None:
    """A 7B model with one 2 GiB cache fits an 8 GB card entirely; four caches would push layers to the CPU.
    Offloading everything is worth far more than answering four at once."""
    gpu = make_inventory(ram_available_gib=32, gpus=(("NVIDIA GeForce RTX 3060 Ti", 8, 7.5),))
    whole = estimate_offload(LLAMA_7B, 4096, (LLAMA_7B.block_count,)).gpus[0].total_bytes
    assert whole < 7.5 * GIB - GPU_HEADROOM_BYTES
    plan = plan_for(LLAMA_7B, gpu, slots=4)
    assert plan.label == "llama.cpp (CUDA)"
    assert plan.slots == 1
    assert said(plan, "one answer at a time (4 were asked for")


def test_openvino_answers_one_at_a_time() -> None:
    plan = plan_for(SMALL, make_inventory(openvino=CORE_ULTRA), slots=4)
    assert plan.backend == "openvino"
    assert plan.slots == 1 and plan.load_options().slots == 1
    assert said(plan, "answers are served one at a time")


def test_slots_setting_flag_and_preferences() -> None:
    assert load_settings().backend.slots == 4
    args = build_parser().parse_args(["chat", "hi", "--slots", "2"])
    assert settings_overrides(args) == {"backend": {"slots": 2}}
    assert preferences(load_settings(**settings_overrides(args))).slots == 2
    with pytest.raises(HearthError, match=r"backend\.slots"):
        load_settings(backend={"slots": 0})


# --- which slot, how many prompt tokens ---------------------------------------------------------------------


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2]) == 2


def test_a_request_takes_the_slot_that_already_holds_most_of_its_prompt() -> None:
    free = [FreeSlot(0, [9, 9], 5), FreeSlot(1, [1, 2, 3, 7], 9), FreeSlot(2, [1, 2], 1)]
    assert choose_slot(free, [1, 2, 3, 4, 5, 6]) == SlotChoice(1, 3)


def test_a_short_shared_start_does_not_evict_another_conversation() -> None:
    """Slot 0 holds a conversation that shares only the system prompt with the new request: the request takes
    the idle slot, and slot 0 keeps its cache for that conversation's next turn."""
    conversation = [1, 2, 3, 10, 11, 12, 13, 14, 15]
    free = [FreeSlot(0, conversation, 8), FreeSlot(1, [], 0)]
    assert choose_slot(free, [1, 2, 3, 20, 21, 22, 23]) == SlotChoice(1, 0)
    assert choose_slot(free, [*conversation, 16, 17]) == SlotChoice(0, 9)  # its next turn


def test_without_a_shared_prefix_the_slot_idle_longest_is_taken() -> None:
    free = [FreeSlot(0, [5], 7), FreeSlot(1, [6], 2), FreeSlot(2, [], 2)]
    assert choose_slot(free, [1, 2]) == SlotChoice(1, 0)  # idle since step 2, and lower than slot 2


def test_the_last_two_prompt_tokens_are_always_read_again() -> None:
    """Sampling needs the last token's logits, and a prompt is never read one token at a time."""
    assert choose_slot([FreeSlot(0, [1, 2, 3, 4], 0)], [1, 2, 3]).reused == 1
    assert choose_slot([FreeSlot(0, [1, 2, 3, 4], 0)], [1, 2, 3, 4, 5]).reused == 3
    assert choose_slot([FreeSlot(0, [1, 2], 0)], [1, 2]).reused == 0
    assert choose_slot([FreeSlot(0, [1], 0)], [1]).reused == 0


def test_a_new_conversation_copies_the_longest_beginning_another_slot_holds() -> None:
    system, mine = [1, 2, 3, 4], [9, 9]
    donors = [FreeSlot(0, [1, 2, 7], 0), FreeSlot(2, [*system, 5, 6, 7], 0), FreeSlot(3, [*system, 8], 0)]
    assert prefix_donor(donors, system + mine, reused=0) == SlotChoice(2, 4)  # ties: the lower index
    assert prefix_donor(donors, system + mine, reused=4) is None  # the slot holds as much already
    assert prefix_donor([FreeSlot(1, [5, 6], 0)], system + mine, reused=0) is None
    assert prefix_donor([], system + mine, reused=0) is None


def test_a_copied_beginning_leaves_the_last_two_prompt_tokens_to_read() -> None:
    prompt = [1, 2, 3, 4, 5]
    assert prefix_donor([FreeSlot(1, [*prompt, 6], 0)], prompt, reused=0) == SlotChoice(1, 3)
    assert prefix_donor([FreeSlot(1, [1, 2], 0)], [1, 2], reused=0) is None


def test_prompts_are_read_first_come_first_filled() -> None:
    assert prefill_shares([300, 400], decoding=0, batch_tokens=512, chunk_tokens=128) == [300, 212]
    assert prefill_shares([1000], decoding=0, batch_tokens=512, chunk_tokens=128) == [512]


def test_while_others_write_a_prompt_is_read_one_chunk_per_step() -> None:
    assert prefill_shares([1000, 50], decoding=3, batch_tokens=512, chunk_tokens=128) == [128, 0]
    assert prefill_shares([100, 50], decoding=3, batch_tokens=512, chunk_tokens=128) == [100, 28]
    assert prefill_shares([], decoding=4, batch_tokens=512, chunk_tokens=128) == []


@pytest.mark.parametrize(
    ("pending", "room", "expected"),
    [
        ([129], 128, [127]),  # not 128, which would leave one token for the next step
        ([130], 128, [128]),
        ([1], 128, [1]),  # a one-token prompt is read as it is
        ([10, 3], 12, [10, 0]),  # two tokens fit, but they would leave one
        ([10, 5], 11, [10, 0]),  # one token would fit: never a piece of one
        ([10, 5], 13, [10, 3]),
    ],
)
def test_no_prompt_is_read_in_a_piece_of_one_token(pending: list[int], room: int, expected: list[int]) -> None:
    assert prefill_shares(pending, decoding=0, batch_tokens=room, chunk_tokens=room) == expected


@pytest.mark.parametrize(
    ("busy", "moves"),
    [
        ([0, 1, 2], []),
        ([1, 2], []),  # side by side already, wherever they are
        ([0, 2], [(2, 1)]),
        ([1, 3], [(3, 2)]),
        ([0, 3, 5], [(5, 1), (3, 2)]),
        ([], []),
    ],
)
def test_busy_slots_are_moved_side_by_side(busy: list[int], moves: list[tuple[int, int]]) -> None:
    assert gap_moves(busy) == moves


# --- sampler chains -----------------------------------------------------------------------------------------


def test_temperature_zero_is_greedy_after_the_repeat_penalty() -> None:
    steps = sampler_steps(GenerationParams(temperature=0.0, repeat_penalty=1.3), fresh_seed=5)
    assert steps == (SamplerStep("penalties", 1.3), SamplerStep("greedy"))


def test_sampling_order_and_seeds() -> None:
    params = GenerationParams(temperature=0.8, top_p=0.9, seed=1234)
    steps = sampler_steps(params, fresh_seed=5)
    assert [step.kind for step in steps] == ["penalties", "top_k", "top_p", "min_p", "temp", "dist"]
    assert steps[-1].value == 1234
    assert steps[2].value == 0.9 and steps[4].value == 0.8
    assert sampler_steps(GenerationParams(seed=None), fresh_seed=77)[-1].value == 77
    # llama.cpp reads 0xFFFFFFFF as "random"; a seed the user chose must stay fixed.
    assert sampler_steps(GenerationParams(seed=-1), fresh_seed=5)[-1].value == 0xFFFFFFFE


def test_waiting_requests_take_free_slots_while_they_ask_for_the_adapter_in_use() -> None:
    # Nothing in progress: the first waiting request chooses, and those after it with the same adapter join it.
    assert admissible(["a", "a", None, "a"], free=4, current=ANY_ADAPTER) == 2
    assert admissible([None, None], free=4, current=ANY_ADAPTER) == 2
    # Answers in progress with "a": a request for "b" waits, and so does everyone behind it.
    assert admissible(["b", "a"], free=3, current="a") == 0
    assert admissible(["a", "b", "a"], free=3, current="a") == 1
    # No more than the free slots, and none without them.
    assert admissible(["a", "a", "a"], free=2, current="a") == 2
    assert admissible(["a"], free=0, current=ANY_ADAPTER) == 0
    assert admissible([], free=2, current=ANY_ADAPTER) == 0
