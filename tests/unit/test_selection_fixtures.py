"""The plan for each fixture machine is what a thoughtful engineer would choose, with the reasons said."""

from __future__ import annotations

import pytest

from backends import registry
from backends.hardware import HardwareInventory
from backends.plan import CPU, BackendPlan, Preferences
from backends.selection import select_backend
from models.gguf import ModelInfo
from models.shared.errors import BackendUnavailable, DoesNotFit
from tests.helpers import make_inventory, synthetic_model

GIB = 1 << 30
LLAMA_7B = synthetic_model(
    "llama-2-7b-chat",
    layers=32,
    layer_mib=117,
    embed_mib=70,
    output_mib=105,
    embedding=4096,
    heads=32,
    kv_heads=32,
    quantization="Q4_0",
    tensor_types=frozenset({"Q4_0", "F32"}),
)
# The same model as Q4_K_M, which mixes in Q6_K tensors that OpenVINO's GGUF reader cannot read.
LLAMA_7B_K = synthetic_model(
    "llama-2-7b-chat",
    layers=32,
    layer_mib=125,
    embed_mib=70,
    output_mib=105,
    embedding=4096,
    heads=32,
    kv_heads=32,
    tensor_types=frozenset({"Q4_K", "Q6_K", "F32"}),
)
MIXTRAL = synthetic_model(
    "mixtral-8x7b-instruct",
    layers=32,
    layer_mib=780,
    embed_mib=70,
    output_mib=105,
    embedding=4096,
    heads=32,
    kv_heads=8,
    trained_context=32768,
)
SMALL = synthetic_model(
    "smollm2-135m",
    layers=30,
    layer_mib=2.1,
    embed_mib=28,
    output_mib=0,
    embedding=576,
    heads=9,
    kv_heads=3,
    quantization="Q4_1",
    tensor_types=frozenset({"Q4_1", "Q8_0", "F32"}),
    vocab=49152,
    trained_context=8192,
)
GEMMA = synthetic_model(
    "gemma-3-1b-it",
    architecture="gemma3",
    layers=26,
    layer_mib=25,
    embed_mib=160,
    output_mib=0,
    embedding=1152,
    heads=4,
    kv_heads=1,
    vocab=262144,
    trained_context=32768,
)
CORE_ULTRA = (
    ("CPU", "Intel(R) Core(TM) Ultra 7 155H"),
    ("GPU", "Intel(R) Arc(TM) Graphics"),
    ("NPU", "Intel(R) AI Boost"),
)


def plan_for(model: ModelInfo, inventory: HardwareInventory, **prefs: object) -> BackendPlan:
    return select_backend(inventory, model, Preferences(**prefs), registry.AUTOMATIC, registry.ALL)  # type: ignore[arg-type]


def said(plan: BackendPlan, text: str) -> bool:
    return any(text in reason for reason in plan.reasons)


def test_cpu_only_8gb_laptop_runs_a_small_model_and_says_how_to_fit_a_7b() -> None:
    laptop = make_inventory(ram_available_gib=5.5, ram_total_gib=8, physical_cores=4)
    plan = plan_for(SMALL, laptop)
    assert (plan.backend, plan.label, plan.threads) == ("llamacpp", "llama.cpp (CPU)", 4)
    with pytest.raises(DoesNotFit) as caught:
        plan_for(LLAMA_7B, laptop)  # 3.8 GiB of weights plus 2 GiB of context cache at 4096 tokens
    assert "Lower the context to" in caught.value.remedy
    allowed = caught.value.context_that_fits  # what would fit, as data (the remedy says it in words)
    assert allowed is not None and f"Lower the context to {allowed} tokens" in caught.value.remedy
    assert 1024 <= allowed < 4096
    assert plan_for(LLAMA_7B, laptop, context_length=allowed).context_length == allowed


def test_cpu_only_workstation_uses_every_physical_core() -> None:
    plan = plan_for(LLAMA_7B, make_inventory(ram_available_gib=58, ram_total_gib=64, physical_cores=16))
    assert (plan.backend, plan.devices, plan.threads) == ("llamacpp", (CPU,), 16) and plan.cpu_only
    assert said(plan, "16 threads, one per physical core")


def test_core_ultra_runs_on_the_integrated_gpu_through_openvino() -> None:
    ultra = make_inventory(ram_available_gib=24, ram_total_gib=32, physical_cores=6, openvino=CORE_ULTRA)
    plan = plan_for(LLAMA_7B, ultra)
    assert (plan.backend, plan.device, plan.label) == ("openvino", "GPU", "OpenVINO (GPU)")
    assert said(plan, "Intel(R) Arc(TM) Graphics (integrated GPU) runs llama GGUF models through OpenVINO")

    npu = plan_for(LLAMA_7B, ultra, device="npu")
    assert (npu.backend, npu.device) == ("openvino", "NPU")
    assert npu.context_length == 1280  # the NPU's static prompt + answer shapes
    assert said(npu, "prompts are limited to 1024 tokens") and said(npu, "chosen by you")

    gemma = plan_for(GEMMA, ultra)  # OpenVINO's GGUF reader does not know gemma3: llama.cpp on the CPU
    assert (gemma.backend, gemma.device) == ("llamacpp", "CPU")
    assert said(
        gemma, "Not chosen — Intel GPU (OpenVINO) / Intel NPU (OpenVINO) / OpenVINO on the CPU: OpenVINO's GGUF"
    )
    k_quant = plan_for(LLAMA_7B_K, ultra)
    assert k_quant.device == "CPU" and said(k_quant, "cannot read Q6_K weights")


def test_one_8gb_gpu_with_a_7b_model_offloads_what_fits() -> None:
    desktop = make_inventory(ram_available_gib=12, physical_cores=6, gpus=(("NVIDIA GeForce RTX 3060 Ti", 8, 6),))
    plan = plan_for(LLAMA_7B, desktop)
    assert plan.label == "llama.cpp (CPU + GPU)"
    gpu, cpu = plan.placements
    assert str(gpu.device) == "cuda:0" and 0 < gpu.layers < 32 and gpu.layers + cpu.layers == 32
    assert (cpu.layer_range, gpu.layer_range) == (range(0, cpu.layers), range(cpu.layers, 32))  # llama.cpp's order
    # llama.cpp counts the output projection as one more layer, the first it offloads
    assert plan.gpu_layers == gpu.layers + 1
    assert gpu.memory.weights_bytes >= LLAMA_7B.output_bytes + gpu.layers * LLAMA_7B.layer_bytes[-1]
    assert gpu.memory.total_bytes <= 6 * GIB - 400 * (1 << 20)
    assert said(plan, f"{gpu.layers} of 32 layers run there and the rest on the CPU")


def test_one_24gb_gpu_holds_a_7b_model_entirely() -> None:
    plan = plan_for(LLAMA_7B, make_inventory(ram_available_gib=28, gpus=(("NVIDIA GeForce RTX 4090", 24, 23.5),)))
    assert (plan.label, plan.gpu_layers, plan.main_gpu) == ("llama.cpp (CUDA)", 33, 0)  # every layer and the output
    assert said(plan, "the whole model and its context cache fit on NVIDIA GeForce RTX 4090")
    assert plan.placements[0].memory.total_bytes > 5 * GIB  # weights + 2 GiB of cache + compute


def test_a_24gb_and_12gb_pair_split_a_model_too_big_for_either() -> None:
    pair = make_inventory(
        ram_available_gib=60, gpus=(("NVIDIA GeForce RTX 3090", 24, 23.4), ("NVIDIA GeForce RTX 3060", 12, 11.6))
    )
    plan = plan_for(MIXTRAL, pair)
    assert plan.label == "llama.cpp (CUDA, 2 GPUs)"
    first, second, _cpu = plan.placements
    assert first.layers + second.layers == 32
    assert first.layers > second.layers > 0  # in proportion to free memory
    assert plan.tensor_split == (float(first.layers), float(second.layers))  # layers per GPU, by number
    assert (plan.main_gpu, plan.device, plan.gpu_layers) == (0, "cuda:0", 33)  # the 3090 holds the most
    for placement in (first, second):
        assert placement.memory.total_bytes <= placement.available_bytes - 400 * (1 << 20)
    assert said(plan, "no single GPU holds the model, but together they do")


def test_a_gpu_with_a_broken_driver_is_reported_not_silently_ignored() -> None:
    broken = make_inventory(gpu_problem="an NVIDIA GPU is present but its driver did not answer (NVML timeout)")
    plan = plan_for(LLAMA_7B, broken)
    assert (plan.backend, plan.device) == ("llamacpp", "CPU")
    assert said(plan, "Not chosen — NVIDIA GPU (llama.cpp with CUDA): an NVIDIA GPU is present but its driver did not")
    assert said(plan, "nvidia-smi")


def test_no_avx2_still_runs_and_says_it_will_be_slow() -> None:
    plan = plan_for(SMALL, make_inventory(flags=frozenset({"avx", "sse4_2"})))
    assert plan.backend == "llamacpp"
    assert said(plan, "no AVX2")


def test_a_gpu_without_cuda_in_llamacpp_says_how_to_use_it() -> None:
    plan = plan_for(LLAMA_7B, make_inventory(gpus=(("NVIDIA GeForce RTX 4070", 12, 11),), cuda=False))
    assert plan.device == "CPU"
    assert said(
        plan, "Not chosen — NVIDIA GPU (llama.cpp with CUDA): NVIDIA GeForce RTX 4070: this llama.cpp build has"
    )
    assert said(plan, "install the NVIDIA CUDA toolkit (nvcc)") and said(plan, "rebuilds it with GPU offload")


def test_forced_choices_are_obeyed_or_explained() -> None:
    cpu_only = make_inventory(openvino=(("CPU", "AMD EPYC"),))
    forced = plan_for(SMALL, cpu_only, backend="openvino")
    assert (forced.backend, forced.device, forced.label) == ("openvino", "CPU", "OpenVINO (CPU)")
    assert said(forced, "chosen by you")
    assert plan_for(SMALL, cpu_only).backend == "llamacpp"  # never OpenVINO on the CPU unless asked

    gpu = make_inventory(gpus=(("NVIDIA GeForce RTX 3060 Ti", 8, 7.5),))
    assert plan_for(LLAMA_7B, gpu, device="cpu").device == "CPU"
    assert plan_for(LLAMA_7B, gpu, gpu_layers=10).placements[0].layers == 10
    with pytest.raises(DoesNotFit) as caught:
        plan_for(MIXTRAL, gpu, gpu_layers=32)
    assert "Ask for at most" in caught.value.remedy
    most = caught.value.gpu_layers_that_fit
    assert most is not None and 0 <= most < 32 and f"at most {most} GPU layers" in caught.value.remedy
    if most:
        assert plan_for(MIXTRAL, gpu, gpu_layers=most).placements[0].layers == most
    with pytest.raises(BackendUnavailable) as missing:
        plan_for(LLAMA_7B, make_inventory(), backend="cuda")
    assert "no NVIDIA GPU" in missing.value.message


def test_the_context_offered_when_memory_is_short_is_priced_by_the_chosen_backend() -> None:
    from backends.memory import HEADROOM_BYTES, estimate_llamacpp, estimate_openvino

    short = make_inventory(ram_available_gib=1.0, openvino=(("CPU", "Test CPU"),))
    offered = {}
    for backend, rule in (("openvino", estimate_openvino), ("llamacpp", estimate_llamacpp)):
        with pytest.raises(DoesNotFit) as caught:
            plan_for(LLAMA_7B, short, backend=backend, context_length=4096)
        assert "Close other programs" in caught.value.remedy  # 3.8 GiB of weights: no context fits in 1 GiB
        with pytest.raises(DoesNotFit) as tight:
            plan_for(
                SMALL,
                make_inventory(ram_available_gib=0.86, openvino=(("CPU", "Test CPU"),)),
                backend=backend,
                context_length=8192,
            )
        offered[backend] = int(tight.value.remedy.split("Lower the context to ")[1].split()[0])
        usable = int(0.86 * GIB) - HEADROOM_BYTES
        assert rule(SMALL, offered[backend]).total_bytes <= usable < rule(SMALL, offered[backend] + 256).total_bytes
    assert offered["openvino"] != offered["llamacpp"]  # each backend's own memory rule, not llama.cpp's for both
