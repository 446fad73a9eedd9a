"""Look at the machine. Every probe here has side effects and fails softly: a probe that cannot answer
records why in ``notes`` and the inventory carries on without that fact."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import platform
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
# A driver call that has not answered in this long is treated as a broken driver.
PROBE_TIMEOUT_S = 10.0

log = logging.getLogger(__name__)

# Flags worth reporting: they decide which llama.cpp kernels run and how fast.
INTERESTING_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "neon",
    "asimd",
)


@dataclass(frozen=True)
class LlamaCppBuild:
    version: str
    ggml_backends: tuple[str, ...]  # compiled ggml backends, e.g. ("cpu", "rpc") or ("cpu", "cuda", "rpc")
    rpc: bool

    @property
    def gpu_offload(self) -> bool:
        """True only when a GPU backend is compiled in (llama.cpp's own check also counts RPC)."""
        return any(name in self.ggml_backends for name in ("cuda", "vulkan", "metal", "sycl", "hip", "opencl"))


@dataclass(frozen=True)
class GpuDevice:
    """An NVIDIA GPU as NVML reports it."""

    index: int
    name: str
    total_bytes: int
    free_bytes: int
    compute_capability: tuple[int, int]
    driver: str
    memory_bytes_per_s: float = 0.0  # peak, from the memory clock and bus width (0: the driver did not say)

    @property
    def id(self) -> str:
        return f"cuda:{self.index}"


@dataclass(frozen=True)
class OpenVinoDevice:
    """A device OpenVINO can compile for: "CPU", "GPU" / "GPU.0" (Intel integrated or discrete), "NPU"."""

    id: str
    full_name: str
    kind: str  # CPU, GPU or NPU
    integrated: bool = True  # an integrated GPU shares the system RAM

    @property
    def accelerator(self) -> bool:
        return self.kind in ("GPU", "NPU")


@dataclass(frozen=True)
class HardwareInventory:
    cpu_model: str
    physical_cores: int
    logical_cores: int
    isa_flags: frozenset[str]
    ram_total_bytes: int
    ram_available_bytes: int
    os: str
    llama_cpp: LlamaCppBuild | None
    notes: tuple[str, ...] = field(default=())
    gpus: tuple[GpuDevice, ...] = ()
    # Why NVIDIA GPUs could not be listed although one seems present (driver missing, broken or hanging).
    gpu_problem: str | None = None
    openvino: tuple[OpenVinoDevice, ...] | None = None  # None: OpenVINO is not installed or failed to load
    openvino_version: str = ""


def probe() -> HardwareInventory:
    notes: list[str] = []
    cpu_model, flags = _cpu_model_and_flags(notes)
    physical, logical, total, available = _cores_and_memory(notes)
    gpus, gpu_problem = _nvidia_gpus(notes)
    openvino, openvino_version = _openvino_devices(notes)
    inventory = HardwareInventory(
        cpu_model=cpu_model,
        physical_cores=physical,
        logical_cores=logical,
        isa_flags=flags,
        ram_total_bytes=total,
        ram_available_bytes=available,
        os=f"{platform.system()} {platform.release()}",
        llama_cpp=_llama_cpp_build(notes),
        notes=tuple(notes),
        gpus=gpus,
        gpu_problem=gpu_problem,
        openvino=openvino,
        openvino_version=openvino_version,
    )
    for note in notes:
        log.warning("hardware probe: %s", note)
    return inventory


def with_current_memory(inventory: HardwareInventory) -> HardwareInventory:
    """The inventory with free RAM read again: it changes by the minute, the rest of the machine does not."""
    import psutil

    try:
        memory = psutil.virtual_memory()
    except (OSError, RuntimeError):  # keep the last figure rather than show none
        return inventory
    return dataclasses.replace(inventory, ram_total_bytes=int(memory.total), ram_available_bytes=int(memory.available))


def block_telemetry_modules() -> None:
    """Make phoning-home modules unimportable. ``import openvino`` imports its converter, which sends a usage event
    to Google Analytics through ``openvino_telemetry`` whenever no consent file exists (seen here under strace);
    with that module blocked the converter falls back to its own no-op stub. Call before importing openvino."""
    for name in ("openvino_telemetry",):
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def with_timeout(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """Run a driver call that might hang in a daemon thread; raise TimeoutError if it does not answer."""
    result: list[T] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=run, name=f"hearth-probe-{what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"{what} did not answer within {timeout_s:.0f} s")
    if error:
        raise error[0]
    return result[0]


def nvidia_hardware_present() -> bool:
    """Signs of an NVIDIA GPU that do not need its driver library: the kernel driver or a PCI device."""
    if Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidia0").exists():
        return True
    pci = Path("/sys/bus/pci/devices")
    try:
        return any((d / "vendor").read_text().strip() == "0x10de" for d in pci.iterdir() if (d / "vendor").exists())
    except OSError:
        return False


def nvidia_gpus() -> tuple[GpuDevice, ...]:
    """The NVIDIA GPUs NVML lists now, with their free memory (none when there is no driver)."""
    return _nvidia_gpus([])[0]


def _nvidia_gpus(notes: list[str]) -> tuple[tuple[GpuDevice, ...], str | None]:
    try:
        import pynvml
    except ImportError:
        return (), None
    try:
        return with_timeout(lambda: _read_nvml(pynvml), PROBE_TIMEOUT_S, "NVML"), None
    except (TimeoutError, Exception) as exc:  # pynvml raises NVMLError subclasses for every driver problem
        if not nvidia_hardware_present():
            return (), None  # no GPU here: nothing to report
        problem = f"an NVIDIA GPU is present but its driver did not answer ({exc})"
        notes.append(problem)
        return (), problem


def _read_nvml(pynvml: object) -> tuple[GpuDevice, ...]:
    nvml: object = pynvml
    nvml.nvmlInit()  # type: ignore[attr-defined]
    try:
        driver = nvml.nvmlSystemGetDriverVersion()  # type: ignore[attr-defined]
        devices = []
        for index in range(nvml.nvmlDeviceGetCount()):  # type: ignore[attr-defined]
            handle = nvml.nvmlDeviceGetHandleByIndex(index)  # type: ignore[attr-defined]
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)  # type: ignore[attr-defined]
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)  # type: ignore[attr-defined]
            name = nvml.nvmlDeviceGetName(handle)  # type: ignore[attr-defined]
            try:  # double data rate: two transfers per clock, bus width in bits
                clock_mhz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)  # type: ignore[attr-defined]
                bus_bits = nvml.nvmlDeviceGetMemoryBusWidth(handle)  # type: ignore[attr-defined]
                peak = float(clock_mhz) * 1e6 * 2 * float(bus_bits) / 8
            except Exception:  # NVMLError_NotSupported on some boards and drivers
                peak = 0.0
            devices.append(
                GpuDevice(
                    index=index,
                    name=name.decode() if isinstance(name, bytes) else str(name),
                    total_bytes=int(memory.total),
                    free_bytes=int(memory.free),
                    compute_capability=(int(major), int(minor)),
                    driver=driver.decode() if isinstance(driver, bytes) else str(driver),
                    memory_bytes_per_s=peak,
                )
            )
        return tuple(devices)
    finally:
        nvml.nvmlShutdown()  # type: ignore[attr-defined]


def _openvino_devices(notes: list[str]) -> tuple[tuple[OpenVinoDevice, ...] | None, str]:
    block_telemetry_modules()
    try:
        import openvino
        import openvino_genai  # noqa: F401  (the pipeline Hearth uses; the runtime alone is not enough)
    except (ImportError, OSError) as exc:
        notes.append(f"OpenVINO is not usable: {exc}")
        return None, ""
    try:
        return with_timeout(lambda: _read_openvino(openvino), PROBE_TIMEOUT_S, "OpenVINO"), openvino.__version__
    except (TimeoutError, RuntimeError) as exc:
        notes.append(f"OpenVINO could not list its devices: {exc}")
        return (), openvino.__version__


def _read_openvino(openvino: object) -> tuple[OpenVinoDevice, ...]:
    core = openvino.Core()  # type: ignore[attr-defined]
    devices = []
    for device in core.available_devices:
        full_name = str(core.get_property(device, "FULL_DEVICE_NAME"))
        kind = device.split(".")[0]
        integrated = True
        if kind == "GPU":
            with contextlib.suppress(RuntimeError):
                integrated = str(core.get_property(device, "DEVICE_TYPE")).endswith("INTEGRATED")
        devices.append(OpenVinoDevice(device, full_name.strip(), kind, integrated))
    return tuple(devices)


def _cpu_model_and_flags(notes: list[str]) -> tuple[str, frozenset[str]]:
    cpuinfo = Path("/proc/cpuinfo")
    model = platform.processor() or platform.machine()
    flags: set[str] = set()
    if not cpuinfo.exists():
        return model, frozenset()
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError as exc:
        notes.append(f"could not read /proc/cpuinfo: {exc}")
        return model, frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Processor", "cpu model") and value.strip():
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return model, frozenset(flag for flag in INTERESTING_FLAGS if flag in flags)


def _cores_and_memory(notes: list[str]) -> tuple[int, int, int, int]:
    import psutil

    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    physical = psutil.cpu_count(logical=False)
    if not physical:
        notes.append("physical core count unknown; assuming the logical count")
        physical = logical
    memory = psutil.virtual_memory()
    return physical, logical, int(memory.total), int(memory.available)


def _llama_cpp_build(notes: list[str]) -> LlamaCppBuild | None:
    try:
        import llama_cpp
    except (ImportError, OSError) as exc:
        notes.append(f"llama-cpp-python is not usable: {exc}")
        return None
    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    names = sorted(
        {
            path.name.removeprefix("libggml-").split(".")[0]
            for path in lib_dir.glob("libggml-*")
            if not path.name.startswith("libggml-base")
        }
    )
    return LlamaCppBuild(
        version=str(llama_cpp.__version__),
        ggml_backends=tuple(names),
        rpc=bool(llama_cpp.llama_supports_rpc()),
    )


def describe(inventory: HardwareInventory) -> list[str]:
    """One line per device, the way users paste them into bug reports."""
    from backends.llamacpp.buffers import extra_buffers_safe
    from backends.memory import format_bytes

    flags = " ".join(sorted(inventory.isa_flags)) or "none detected"
    lines = [
        f"CPU: {inventory.cpu_model} — {inventory.physical_cores} physical / {inventory.logical_cores} logical "
        f"cores; ISA: {flags}",
        f"RAM: {format_bytes(inventory.ram_available_bytes)} available of {format_bytes(inventory.ram_total_bytes)}",
    ]
    for gpu in inventory.gpus:
        lines.append(
            f"GPU {gpu.index}: {gpu.name} — {format_bytes(gpu.free_bytes)} free of {format_bytes(gpu.total_bytes)}; "
            f"compute capability {gpu.compute_capability[0]}.{gpu.compute_capability[1]}; driver {gpu.driver}"
        )
    if inventory.gpu_problem:
        lines.append(f"GPU: {inventory.gpu_problem}")
    if inventory.openvino is None:
        lines.append("OpenVINO: not installed")
    else:
        for device in inventory.openvino:
            extra = "" if device.kind != "GPU" else (" (integrated)" if device.integrated else " (discrete)")
            lines.append(f"OpenVINO {device.id}: {device.full_name}{extra}")
    build = inventory.llama_cpp
    if build is None:
        lines.append("llama.cpp: not installed")
    else:
        lines.append(
            f"llama.cpp: llama-cpp-python {build.version}; ggml backends {', '.join(build.ggml_backends)}; "
            f"GPU offload {'yes' if build.gpu_offload else 'no'}; RPC {'yes' if build.rpc else 'no'}"
        )
        if not extra_buffers_safe(inventory.isa_flags):
            lines.append(
                "llama.cpp: weights are not repacked for AMX on this CPU (llama.cpp's AMX path crashes, "
                "ggml-org/llama.cpp#20824): they stay as in the file"
            )
    return lines
