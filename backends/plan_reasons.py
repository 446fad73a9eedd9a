"""The words of a plan: why the chosen route runs the model, and why each other route Hearth weighs does not.

Pure: phrases built from the inventory, the model's facts and what selection found, never from the hardware.
A *route* is one way Hearth can run a model (an engine on a kind of device); automatic selection weighs them all,
and a plan names every route it did not take with the measured or known reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.hardware import HardwareInventory

NVIDIA, INTEL_GPU, NPU, OPENVINO_CPU, LLAMACPP_CPU = "nvidia", "intel-gpu", "npu", "openvino-cpu", "llamacpp-cpu"
ROUTES = (NVIDIA, INTEL_GPU, NPU, OPENVINO_CPU, LLAMACPP_CPU)
ROUTE_NAMES = {
    NVIDIA: "NVIDIA GPU (llama.cpp with CUDA)",
    INTEL_GPU: "Intel GPU (OpenVINO)",
    NPU: "Intel NPU (OpenVINO)",
    OPENVINO_CPU: "OpenVINO on the CPU",
    LLAMACPP_CPU: "llama.cpp on the CPU",
}


@dataclass(frozen=True)
class CpuSpeedRecord:
    """OpenVINO's CPU decode speed as a multiple of llama.cpp's, measured on one kind of CPU with
    ``bench/compare_backends.py`` (same GGUF, same questions, interleaved, one run)."""

    isa_flag: str  # the record applies to CPUs with this flag (checked in order; the first match wins)
    ratio: float
    machine: str


# Measured on this project's machines (SmolLM2-135M-Instruct Q4_1, greedy, 128 tokens): see DESIGN.md.
OPENVINO_CPU_SPEEDS = (
    CpuSpeedRecord("avx512f", 1.02, "an AVX-512 CPU"),
    CpuSpeedRecord("avx2", 0.58, "an AVX2-only AMD EPYC"),
)
# Within this band the two engines decode at "about the same speed" (runs on a shared machine vary this much).
SAME_SPEED_BAND = (0.9, 1.1)


def openvino_cpu_speed(isa_flags: frozenset[str]) -> CpuSpeedRecord | None:
    return next((record for record in OPENVINO_CPU_SPEEDS if record.isa_flag in isa_flags), None)


def openvino_cpu_reason(isa_flags: frozenset[str]) -> str:
    """Why OpenVINO, which can run the model on this CPU, does not: the measured speed against llama.cpp."""
    record = openvino_cpu_speed(isa_flags)
    compile_note = "and it compiles the model before the first answer while llama.cpp starts at once"
    if record is None:
        return (
            "available, but its speed against llama.cpp was never measured on a CPU without AVX2; llama.cpp is "
            f"Hearth's CPU engine, {compile_note.removeprefix('and ')}"
        )
    measured = f"measured {record.ratio:.2f}× llama.cpp's decode speed on {record.machine}, the kind of CPU this is"
    low, high = SAME_SPEED_BAND
    if low <= record.ratio <= high:
        return f"available, about the same decode speed as llama.cpp ({measured}), {compile_note}"
    if record.ratio < low:
        return f"available, but slower here ({measured}), {compile_note}"
    return f"available and faster here ({measured}); choose it as the backend to use it"


def missing_device_reason(route: str, inventory: HardwareInventory) -> str:
    """Why a route has no device on this machine at all."""
    if route == NVIDIA:
        if inventory.gpu_problem:
            return f"{inventory.gpu_problem}; check the driver with `nvidia-smi`, then restart Hearth"
        return "no NVIDIA GPU found"
    seen = ", ".join(d.id for d in inventory.openvino or ()) or "no devices"
    if inventory.openvino is None:
        return "OpenVINO GenAI is not installed or failed to load, so llama.cpp runs the model"
    if route == INTEL_GPU:
        return f"no Intel GPU found (OpenVINO sees: {seen})"
    if route == NPU:
        return f"no NPU present (OpenVINO sees: {seen})"
    return f"OpenVINO lists no CPU device (it sees: {seen})"


def rank_why(route: str, split: bool = False, partial: bool = False) -> str:
    """What makes ``route`` come before the routes ranked after it."""
    if route == NVIDIA:
        if partial:
            return "the layers that fit on the NVIDIA GPU run much faster there than on the CPU"
        if split:
            return "the NVIDIA GPUs together hold the whole model, the fastest place for it here"
        return "the whole model fits on the NVIDIA GPU, the fastest place for it here"
    if route == INTEL_GPU:
        return "the Intel GPU runs the model and leaves the CPU free"
    if route == NPU:
        return "the NPU runs the model at low power and leaves the CPU free"
    if route == OPENVINO_CPU:
        return "OpenVINO runs it on the CPU, as asked"
    return "no GPU or NPU here can run this model, so it runs on the CPU with llama.cpp"


def not_chosen(routes: tuple[str, ...], reason: str) -> str:
    return f"Not chosen — {' / '.join(ROUTE_NAMES[route] for route in routes)}: {reason}"


def comes_after(chosen_label: str) -> str:
    return f"would run, but comes after {chosen_label} in Hearth's order"
