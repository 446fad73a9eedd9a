"""The network's cost per token of a split, and the planner's "slower than this machine alone"."""

from __future__ import annotations

import pytest

from backends.workers.cost import LinkFacts, bytes_per_token, network_ms_per_token, output_here, slower_than_alone

SMOLLM2 = (49_152, 576)  # vocabulary, embedding length


def test_the_logits_from_the_last_worker_are_most_of_the_bytes() -> None:
    first, last = bytes_per_token(*SMOLLM2, workers=2)
    assert last - first == 49_152 * 4
    # `hearth bench pipeline` measured about 220 KB per token for two loopback workers on this model
    assert sum(bytes_per_token(*SMOLLM2, workers=2)) == pytest.approx(220_000, rel=0.05)


def test_with_the_output_projection_here_only_hidden_states_cross_and_cpu_workers_get_it_here() -> None:
    first, last = bytes_per_token(*SMOLLM2, workers=2, logits_back=False)
    assert first == last == 576 * 4 * 2 + 12_000  # no logits: the hidden state both ways and the graph
    slow = LinkFacts(round_trip_ms=5.0, bytes_per_s=12.5e6)
    assert network_ms_per_token([slow], *SMOLLM2, logits_back=False) < network_ms_per_token([slow], *SMOLLM2) - 15
    assert output_here(["CPU: Xeon", "CPU: EPYC"])
    assert not output_here(["CPU: Xeon", "GPU CUDA0: NVIDIA L4"])  # the GPU holding the last layers runs it faster
    assert not output_here([])


def test_each_worker_adds_a_round_trip_and_its_bytes_at_its_bandwidth() -> None:
    fast = LinkFacts(round_trip_ms=0.1, bytes_per_s=125e6)  # 1 Gbit/s
    slow = LinkFacts(round_trip_ms=5.0, bytes_per_s=12.5e6)  # 100 Mbit/s
    one_fast = network_ms_per_token([fast], *SMOLLM2)
    assert one_fast == pytest.approx(0.1 + sum(bytes_per_token(*SMOLLM2, 1)) / 125e6 * 1000)
    assert network_ms_per_token([slow], *SMOLLM2) > 10 * one_fast
    assert network_ms_per_token([fast, fast], *SMOLLM2) > one_fast
    unmeasured = network_ms_per_token([LinkFacts(0.2, 0.0)], *SMOLLM2)
    assert unmeasured == pytest.approx(0.2)  # no bandwidth known: only the round trip is counted


def test_cpu_workers_for_a_model_that_fits_here_are_called_slower_and_a_gpu_or_a_big_model_is_not() -> None:
    warning = slower_than_alone(3.4, fits_here=True, devices=["CPU: Xeon", "CPU: EPYC"])
    assert warning is not None and "slower than this machine alone" in warning and "3.4 ms" in warning
    assert slower_than_alone(3.4, fits_here=False, devices=["CPU: Xeon"]) is None
    assert slower_than_alone(3.4, fits_here=True, devices=["CPU: Xeon", "CUDA0: RTX 4090"]) is None
